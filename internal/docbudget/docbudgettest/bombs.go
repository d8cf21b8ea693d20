// Package docbudgettest writes the documents that tests of document
// budgets send: YAML alias bombs of any size, shaped as each kind of
// document the server reads.
package docbudgettest

import (
	"fmt"
	"strings"
)

// Anchors is a flow mapping of levels anchors, l0 to l<levels-1>: l0 is a
// list of width strings, and each next anchor a list of width aliases of
// the one before. The last one expands to width^levels strings.
func Anchors(levels, width int) string {
	var b strings.Builder
	b.WriteString("{")
	for l := range levels {
		if l > 0 {
			b.WriteString(", ")
		}
		item := `"lol"`
		if l > 0 {
			item = fmt.Sprintf("*l%d", l-1)
		}
		fmt.Fprintf(&b, "l%d: &l%d [%s]", l, l, strings.TrimSuffix(strings.Repeat(item+",", width), ","))
	}
	b.WriteString("}")
	return b.String()
}

// Last is the alias of the last anchor of Anchors(levels, …).
func Last(levels int) string { return fmt.Sprintf("*l%d", levels-1) }

// Expansions is how many aliases the last anchor of Anchors(levels,
// width) expands to where it is used once: width at each of its levels
// but the first, and one for the alias itself.
func Expansions(levels, width int) int64 {
	n, per := int64(1), int64(1)
	for range levels - 1 {
		per *= int64(width)
		n += per
	}
	return n
}

// Pipeline is a pipeline definition whose step holds the anchors in its
// parameters and uses the last one as its command: the probe of issue 39
// (8 levels, 10 aliases a level: about 560 bytes), which the decoder
// expands while it fills the step's fields.
func Pipeline(levels, width int) string {
	return fmt.Sprintf("name: bomb\nproject: fraud-models\nsteps:\n  - name: boom\n    computeResource: 1 GPU\n    parameters: %s\n    command: %s\n",
		Anchors(levels, width), Last(levels))
}

// Estate is an estate file with an app whose launch form holds the
// anchors and uses the last one as a property's default: the estate probe
// of issue 39, which costs its time when the form is read into the
// catalogue.
func Estate(levels, width int) string {
	return fmt.Sprintf(`apiVersion: klique/v1
kind: Estate
apps:
  catalogue:
    - name: bomb
      kind: session
      port: 8000
      run: {process: "python3 -m http.server {port}"}
      form:
        type: object
        $defs: %s
        properties:
          boom: {type: array, default: %s}
`, Anchors(levels, width), Last(levels))
}

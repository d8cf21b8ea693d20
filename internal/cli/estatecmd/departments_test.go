package estatecmd

import (
	"strings"
	"testing"
	"time"
)

// `klique get departments` lists the organisation tree examples/
// departments.yaml makes, with each level's reservation, limits, weight and
// what it holds; `klique get department NAME` shows one; a member sees the
// department above their group; `klique get groups` still lists teams.
func TestGetDepartments(t *testing.T) {
	const key = "klique-departments-test-bootstrap-key-0123456789abcd"
	ctx, app := startControlPlane(t, key, 120*time.Second)
	klique, ok := cliAs(t, ctx, app.URL())
	ok(key, "apply", "-f", "../../../examples/estate.yaml")
	if out := ok(key, "get", "departments"); strings.Contains(out, "research") {
		t.Fatalf("departments before the tree is applied:\n%s", out)
	}
	ok(key, "apply", "-f", "../../../examples/departments.yaml")

	out := ok(key, "get", "departments")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("klique get departments:\n%s", out)
	}
	for _, want := range []string{"NAME", "PARENT", "RESERVATION", "LIMIT", "EFFECTIVE LIMIT", "WEIGHT", "HOLDS"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("header %q lacks %s", lines[0], want)
		}
	}
	if f := strings.Fields(lines[1]); len(f) < 7 || f[0] != "research" || f[1] != "-" || f[2] != "40" || f[3] != "64" || f[4] != "64" || f[5] != "2" ||
		!strings.Contains(lines[1], "ml-research, vision") {
		t.Errorf("research's row %q", lines[1])
	}

	one := ok(key, "get", "department", "research", "-o", "json")
	for _, want := range []string{`"name": "research"`, `"reservationGpus": 40`, `"weight": 2`, `"name": "vision"`} {
		if !strings.Contains(one, want) {
			t.Errorf("klique get department research -o json lacks %s:\n%s", want, one)
		}
	}
	if _, errOut, code := klique(key, "get", "department", "vision"); code == 0 || !strings.Contains(errOut, "no department 'vision'") {
		t.Errorf("get department of a group: exit %d: %s", code, errOut)
	}

	groups := ok(key, "get", "groups")
	var names []string
	for _, l := range strings.Split(strings.TrimSpace(groups), "\n")[1:] {
		names = append(names, strings.Fields(l)[0])
	}
	if strings.Join(names, ",") != "ml-research,nlp,vision" {
		t.Errorf("klique get groups lists %v, want the teams ml-research, nlp and vision:\n%s", names, groups)
	}

	tree := ok(key, "policy", "--tree")
	t.Log(tree)
	for _, want := range []string{"NODE", "EFFECTIVE LIMIT", "research/", "0 / 40 / 64", "\n  ml-research ", "\n  vision ", "\nnlp "} {
		if !strings.Contains(tree, want) {
			t.Errorf("klique policy --tree lacks %q:\n%s", want, tree)
		}
	}
	if strings.Index(tree, "research/") > strings.Index(tree, "  ml-research") || strings.Index(tree, "  vision") > strings.Index(tree, "\nnlp") {
		t.Errorf("klique policy --tree is not in tree order:\n%s", tree)
	}
	if _, errOut, code := klique(key, "policy", "vision", "--tree"); code == 0 || !strings.Contains(errOut, "give a group or --tree, not both") {
		t.Errorf("policy GROUP --tree: exit %d: %s", code, errOut)
	}

	ok(key, "create", "group", "robotics", "--department", "research")
	if out := ok(key, "get", "department", "research"); !strings.Contains(out, "robotics") {
		t.Errorf("robotics, created in research, is not in it:\n%s", out)
	}
	if _, errOut, code := klique(key, "create", "group", "drones", "--department", "nlp"); code == 0 || !strings.Contains(errOut, "no department 'nlp'") {
		t.Errorf("create group in a group: exit %d: %s", code, errOut)
	}

	ok(key, "create", "user", "vic", "--group", "vision")
	vic := strings.TrimSpace(ok(key, "create", "apikey", "--user", "vic"))
	mine := ok(vic, "get", "departments")
	if !strings.Contains(mine, "research") || strings.Contains(mine, "ml-research") {
		t.Errorf("vic's departments show another group or miss research:\n%s", mine)
	}
}

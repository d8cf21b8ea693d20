package docbudget

import (
	"errors"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// Unmarshal decodes a YAML (or JSON) document into v with opts once YAML
// has found it within the budget.
func (b Budget) Unmarshal(data []byte, v any, opts ...yaml.DecodeOption) error {
	if err := b.YAML(data); err != nil {
		return err
	}
	return Decode(data, v, opts...)
}

// ErrUnreadable is what Decode answers for a document its decoder could
// not read without panicking.
var ErrUnreadable = errors.New("the YAML cannot be read; check its syntax, and any tags (!...) in it")

// Decode decodes a YAML (or JSON) document into v with opts. The YAML
// decoder panics on some malformed input (a tag with no value where a list
// belongs: "steps: !0"); a document comes from users, so a panic is
// turned into ErrUnreadable rather than taking the server down.
func Decode(data []byte, v any, opts ...yaml.DecodeOption) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = ErrUnreadable
		}
	}()
	return yaml.UnmarshalWithOptions(data, v, opts...)
}

// YAML counts a YAML (or JSON) document without expanding its aliases and
// returns an *Error when it is over the budget. A document that does not
// parse is answered with the parser's error, the one the decoder would
// give. Anchors are held to three rules that make each alias's size known
// where it is used, whatever order a decoder fills fields in: an alias
// comes after its anchor, outside it, and an anchor's name is given once.
func (b Budget) YAML(data []byte) error {
	u, err := b.count(data)
	if err != nil {
		return err
	}
	return b.Check(u)
}

// count measures a document, stopping at the first measure that is over
// the budget (the bytes, then the nesting of its tokens) before the work
// that measure bounds.
func (b Budget) count(data []byte) (u Usage, err error) {
	u.Bytes = int64(len(data))
	if b.MaxBytes > 0 && len(data) > b.MaxBytes {
		return u, nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = b.refuse("%s", ErrUnreadable.Error())
		}
	}()
	tks := lexer.Tokenize(string(data))
	if u.Depth = int64(tokenDepth(tks)); b.MaxDepth > 0 && u.Depth > int64(b.MaxDepth) {
		return u, nil
	}
	f, err := parser.Parse(tks, 0)
	if err != nil {
		return u, err
	}
	c := counter{b: b, anchors: map[string]*anchor{}}
	u.Depth = 0
	for _, doc := range f.Docs {
		s := c.node(doc.Body)
		if c.err != nil {
			return u, c.err
		}
		u.Nodes, u.Aliases, u.Depth = add(u.Nodes, s.nodes), add(u.Aliases, s.aliases), max(u.Depth, s.depth)
	}
	return u, nil
}

// tokenDepth is the nesting of a token stream: flow collections ([ and {)
// open and close a level each; in block style a key or a "-" opens a level
// under the nearest one before it in a column to its left.
func tokenDepth(tks token.Tokens) int {
	var cols []int
	flow, deepest := 0, 0
	for _, tk := range tks {
		switch tk.Type {
		case token.DocumentHeaderType, token.DocumentEndType:
			cols, flow = cols[:0], 0
		case token.SequenceStartType, token.MappingStartType:
			flow++
		case token.SequenceEndType, token.MappingEndType:
			flow = max(flow-1, 0)
		case token.CommentType:
		default:
			block := tk.Type == token.SequenceEntryType || tk.Type == token.MappingKeyType || tk.NextType() == token.MappingValueType
			if flow == 0 && block && tk.Position != nil {
				for len(cols) > 0 && cols[len(cols)-1] >= tk.Position.Column {
					cols = cols[:len(cols)-1]
				}
				cols = append(cols, tk.Position.Column)
			}
		}
		deepest = max(deepest, len(cols)+flow)
	}
	return deepest
}

// size is what a node holds once its aliases are expanded.
type size struct{ nodes, aliases, depth int64 }

// anchor is an anchor's size, known once its value has been counted.
type anchor struct {
	size
	done bool
}

// counter walks a syntax tree in document order, counting each anchor once.
type counter struct {
	b       Budget
	anchors map[string]*anchor
	err     error
}

func (c *counter) node(n ast.Node) size {
	if c.err != nil || n == nil {
		return size{}
	}
	switch n := n.(type) {
	case *ast.DocumentNode:
		return c.node(n.Body)
	case *ast.CommentNode, *ast.CommentGroupNode:
		return size{}
	case *ast.TagNode:
		return c.node(n.Value)
	case *ast.MappingKeyNode:
		return c.node(n.Value)
	case *ast.AnchorNode:
		name := tokenValue(n.Name)
		if _, ok := c.anchors[name]; ok {
			c.err = c.b.refuse("anchor &%s is defined again on line %d; give each anchor its own name", name, line(n))
			return size{}
		}
		a := &anchor{}
		c.anchors[name] = a
		a.size, a.done = c.node(n.Value), true
		return a.size
	case *ast.AliasNode:
		name := tokenValue(n.Value)
		a, ok := c.anchors[name]
		switch {
		case !ok:
			c.err = c.b.refuse("alias *%s (line %d) comes before any anchor &%s; define the anchor first", name, line(n), name)
			return size{}
		case !a.done:
			c.err = c.b.refuse("alias *%s (line %d) is inside its own anchor &%s; an anchor cannot hold itself", name, line(n), name)
			return size{}
		}
		return size{nodes: a.nodes, aliases: add(a.aliases, 1), depth: a.depth}
	case *ast.MappingValueNode:
		k, v := c.node(n.Key), c.node(n.Value)
		return size{nodes: add(k.nodes, v.nodes), aliases: add(k.aliases, v.aliases), depth: max(k.depth, v.depth)}
	case *ast.MappingNode:
		s := size{nodes: 1}
		for _, v := range n.Values {
			s = s.holding(c.node(v))
		}
		s.depth++
		return s
	case *ast.SequenceNode:
		s := size{nodes: 1}
		for _, v := range n.Values {
			s = s.holding(c.node(v))
		}
		s.depth++
		return s
	}
	// A scalar: a string, number, boolean, null, literal block or merge key.
	return size{nodes: 1}
}

// holding adds a child's size to its parent's; the parent's depth is its
// deepest child's until the parent adds its own level.
func (s size) holding(child size) size {
	return size{nodes: add(s.nodes, child.nodes), aliases: add(s.aliases, child.aliases), depth: max(s.depth, child.depth)}
}

func tokenValue(n ast.Node) string {
	if n == nil || n.GetToken() == nil {
		return ""
	}
	return n.GetToken().Value
}

func line(n ast.Node) int {
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		return tk.Position.Line
	}
	return 0
}

package docbudget

import (
	"bytes"
	"encoding/json"
	"io"
)

// JSON counts a JSON document token by token and returns an *Error when
// it is over the budget. JSON has no aliases, so its values are its
// tokens; what does not parse is left for the caller's decoder to report,
// as it would have.
func (b Budget) JSON(data []byte) error {
	u := Usage{Bytes: int64(len(data))}
	if b.MaxBytes > 0 && len(data) > b.MaxBytes {
		return b.Check(u)
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var depth int64
	for {
		tk, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil
		}
		switch tk {
		case json.Delim('{'), json.Delim('['):
			depth++
			u.Nodes++
			u.Depth = max(u.Depth, depth)
		case json.Delim('}'), json.Delim(']'):
			depth--
		default:
			u.Nodes++
		}
	}
	return b.Check(u)
}

// Value counts a value a transport has already decoded from JSON (maps,
// lists and scalars, such as a GraphQL JSON argument) as the JSON it
// encodes to, and returns an *Error when it is over the budget.
func (b Budget) Value(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return b.refuse("the values cannot be written as JSON: %v", err)
	}
	return b.JSON(data)
}

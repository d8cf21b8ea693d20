package sqlstore

import "testing"

func TestRebind(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`SELECT 1`, `SELECT 1`},
		{`a = ? AND b IN (?, ?)`, `a = $1 AND b IN ($2, $3)`},
		{`x = '?' AND y = ?`, `x = '?' AND y = $1`},
		{`"we?ird" = ? AND z = 'it''s ?'`, `"we?ird" = $1 AND z = 'it''s ?'`},
	} {
		if got := Rebind(c.in, DollarPlaceholder); got != c.want {
			t.Errorf("Rebind(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

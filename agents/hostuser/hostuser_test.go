package hostuser

import (
	"strings"
	"testing"
)

func TestParseRange(t *testing.T) {
	r, err := ParseRange(" 20000-20009 ")
	if err != nil || r != (Range{First: 20000, Last: 20009}) || r.String() != "20000-20009" {
		t.Fatalf("ParseRange = %v, %v", r, err)
	}
	for in, want := range map[string]string{
		"20000":           "FIRST-LAST",
		"a-b":             "FIRST-LAST",
		"0-999":           "among the system's accounts",
		"30000-20000":     "ends (20000) before it starts (30000)",
		"1000-4294967295": "above the largest uid",
	} {
		if _, err := ParseRange(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseRange(%q) = %v, want an error saying %q", in, err, want)
		}
	}
	if err := Default.Check(); err != nil {
		t.Errorf("the default range %s: %v", Default, err)
	}
}

func TestAPoolGivesTheLowestFreeIdAndSaysWhenItIsUsedUp(t *testing.T) {
	p := NewPool(Range{First: 5000, Last: 5002})
	var got []uint32
	for range 3 {
		id, err := p.Take()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, id)
	}
	if got[0] != 5000 || got[1] != 5001 || got[2] != 5002 {
		t.Errorf("took %v, want 5000, 5001, 5002", got)
	}
	if _, err := p.Take(); err == nil || !strings.Contains(err.Error(), "--task-uids") {
		t.Errorf("a used-up range: %v, want a refusal naming --task-uids", err)
	}
	p.Give(5001)
	if id, err := p.Take(); err != nil || id != 5001 {
		t.Errorf("after giving 5001 back: %d, %v", id, err)
	}
}

package graph

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
)

func ptr[T any](v T) *T { return &v }

func wantBadInput(t *testing.T, err error) {
	t.Helper()
	if code := platform.ErrorCode(err); code != platform.CodeInvalid {
		t.Errorf("error %v has code %q, want %s", err, code, platform.CodeInvalid)
	}
}

func TestPageSize(t *testing.T) {
	t.Run("no first gives the default page", func(t *testing.T) {
		if n, err := pageSize(nil); err != nil || n != defaultPageSize {
			t.Errorf("pageSize(nil) = %d, %v; want %d", n, err, defaultPageSize)
		}
	})
	t.Run("the bounds are accepted", func(t *testing.T) {
		for _, v := range []int{0, 1, maxPageSize} {
			if n, err := pageSize(&v); err != nil || n != v {
				t.Errorf("pageSize(%d) = %d, %v", v, n, err)
			}
		}
	})
	t.Run("outside the bounds is BAD_USER_INPUT naming the bounds", func(t *testing.T) {
		for _, v := range []int{-1, maxPageSize + 1} {
			_, err := pageSize(&v)
			wantBadInput(t, err)
			if err != nil && !strings.Contains(err.Error(), fmt.Sprint(maxPageSize)) {
				t.Errorf("message %q does not give the largest page", err)
			}
		}
	})
}

func TestCursors(t *testing.T) {
	t.Run("a cursor round-trips any key", func(t *testing.T) {
		for _, k := range []string{"a", "ml-research\x001 GPU", "00000000000000000042", "ü/+="} {
			got, err := decodeCursor(ptr(encodeCursor(k)))
			if err != nil || got != k {
				t.Errorf("decodeCursor(encodeCursor(%q)) = %q, %v", k, got, err)
			}
		}
	})
	t.Run("no cursor starts at the beginning", func(t *testing.T) {
		for _, c := range []*string{nil, ptr("")} {
			if got, err := decodeCursor(c); err != nil || got != "" {
				t.Errorf("decodeCursor(%v) = %q, %v", c, got, err)
			}
		}
	})
	t.Run("a cursor that is not base64 is BAD_USER_INPUT", func(t *testing.T) {
		_, err := decodeCursor(ptr("not a cursor!"))
		wantBadInput(t, err)
	})
	t.Run("a sequence cursor that is not a number is BAD_USER_INPUT", func(t *testing.T) {
		_, _, err := seqPage(nil, ptr(encodeCursor("foo")))
		wantBadInput(t, err)
	})
	t.Run("a sequence cursor asks the store for one more than the page", func(t *testing.T) {
		p, n, err := seqPage(ptr(3), ptr(encodeCursor("42")))
		if err != nil || n != 3 || p.After != "42" || p.Limit != 4 {
			t.Errorf("seqPage = %+v, %d, %v; want After 42, Limit 4, n 3", p, n, err)
		}
	})
	t.Run("descending keys sort larger numbers first", func(t *testing.T) {
		vals := []int64{0, 1, 9, 10, 1_700_000_000_000_000, 42}
		keys := make([]string, len(vals))
		for i, v := range vals {
			keys[i] = descKey(v)
		}
		sort.Strings(keys)
		var got []string
		for _, k := range keys {
			for _, v := range vals {
				if descKey(v) == k {
					got = append(got, fmt.Sprint(v))
				}
			}
		}
		if strings.Join(got, ",") != "1700000000000000,42,10,9,1,0" {
			t.Errorf("descKey order = %v", got)
		}
	})
}

func TestPaginate(t *testing.T) {
	items := []string{"a", "b", "c", "d", "e", "f", "g"}
	id := func(s string) string { return s }

	t.Run("pages cover every item once and say when there is more", func(t *testing.T) {
		var got []string
		var after *string
		var more []bool
		for i := 0; i < 10; i++ {
			page, cursors, info, err := paginate(items, id, ptr(3), after)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) != len(cursors) {
				t.Fatalf("%d items and %d cursors", len(page), len(cursors))
			}
			got = append(got, page...)
			more = append(more, info.HasNextPage)
			if !info.HasNextPage {
				break
			}
			after = info.EndCursor
		}
		if strings.Join(got, "") != "abcdefg" || fmt.Sprint(more) != "[true true false]" {
			t.Errorf("pages gave %v with hasNextPage %v", got, more)
		}
	})
	t.Run("a page that ends exactly at the last item has no next page", func(t *testing.T) {
		_, _, info, _ := paginate(items[:6], id, ptr(3), ptr(encodeCursor("c")))
		if info.HasNextPage {
			t.Errorf("hasNextPage after d,e,f of a..f, want false")
		}
	})
	t.Run("a cursor past the end gives an empty last page", func(t *testing.T) {
		page, _, info, err := paginate(items, id, ptr(3), ptr(encodeCursor("zzz")))
		if err != nil || len(page) != 0 || info.HasNextPage || info.EndCursor != nil {
			t.Errorf("page = %v, info = %+v, err = %v", page, info, err)
		}
	})
	t.Run("trim keeps n items and reports the extra one as a next page", func(t *testing.T) {
		got, cursors, info := trim([]string{"x", "y", "z"}, 2, id)
		if strings.Join(got, "") != "xy" || !info.HasNextPage || *info.EndCursor != cursors[1] || cursors[1] != encodeCursor("y") {
			t.Errorf("trim = %v, %v, %+v", got, cursors, info)
		}
		_, _, info = trim([]string{"x", "y"}, 2, id)
		if info.HasNextPage {
			t.Errorf("trim of exactly n items reports a next page")
		}
	})
}

// TestAPIKeysPagination pages through keys created in the same microsecond
// (several keys of one request, or a busy server): every key must come
// exactly once, newest first.
func TestAPIKeysPagination(t *testing.T) {
	b := platformtest.SQLite(t)
	ctx := b.Admin

	at := time.Now().UTC().Truncate(time.Microsecond).Add(time.Hour)
	want := map[string]bool{}
	for i := 0; i < 5; i++ {
		k := &model.APIKey{ID: model.NewID(), TenantID: b.Tenant, UserID: b.AdminID, Name: fmt.Sprintf("k%d", i),
			Prefix: fmt.Sprintf("klq_%d", i), Hash: identity.HashAPIKey(fmt.Sprintf("secret-%d", i)), CreatedAt: at}
		if err := b.Store.CreateAPIKey(ctx, k); err != nil {
			t.Fatalf("create key: %v", err)
		}
		want[k.ID] = true
	}

	q := &queryResolver{NewResolver(b.Svc)}
	var got []string
	var after *string
	for page := 0; page < 10; page++ {
		conn, err := q.APIKeys(ctx, nil, ptr(2), after)
		if err != nil {
			t.Fatalf("apiKeys: %v", err)
		}
		for _, e := range conn.Edges {
			got = append(got, e.Node.Name)
		}
		if !conn.PageInfo.HasNextPage {
			break
		}
		after = conn.PageInfo.EndCursor
	}
	if len(got) != 6 {
		t.Fatalf("pages of 2 gave %d keys %v, want the 5 new ones and the bootstrap key once each", len(got), got)
	}
	seen := map[string]int{}
	for _, n := range got {
		seen[n]++
	}
	for n, c := range seen {
		if c != 1 {
			t.Errorf("key %s came %d times", n, c)
		}
	}
	if got[5] != "bootstrap" {
		t.Errorf("the oldest key (bootstrap) is not last: %v", got)
	}
}

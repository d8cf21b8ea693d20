package router

import (
	"net/http"
	"testing"
	"time"
)

func TestSplitReadsTheKindTheNameAndTheRest(t *testing.T) {
	for path, want := range map[string][4]string{
		"/apps/t1":                {"apps", "t1", "", "ok"},
		"/apps/t1/":               {"apps", "t1", "/", "ok"},
		"/apps/t1/lab/tree?x":     {"apps", "t1", "/lab/tree?x", "ok"},
		"/routes/llama/v1/chat":   {"routes", "llama", "/v1/chat", "ok"},
		"/apps/":                  {"", "", "", ""},
		"/other/t1/":              {"", "", "", ""},
		"/apps/t1/_klique/signin": {"apps", "t1", SignInPath, "ok"},
	} {
		k, n, r, ok := split(path)
		got := [4]string{k, n, r, ""}
		if ok {
			got[3] = "ok"
		}
		if got != want {
			t.Errorf("split(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestStripCredentialsKeepsTheAppsOwnCookies(t *testing.T) {
	h := http.Header{}
	h.Set("Authorization", "Bearer kq_secret")
	h.Set("X-Api-Key", "kq_secret")
	h.Set("Proxy-Authorization", "Basic x")
	h.Add("Cookie", "_xsrf=abc; "+CookieName+"=tok")
	h.Add("Cookie", "theme=dark")
	stripCredentials(h)
	if h.Get("Authorization") != "" || h.Get("X-Api-Key") != "" || h.Get("Proxy-Authorization") != "" {
		t.Fatalf("credentials left: %v", h)
	}
	if got := h.Values("Cookie"); len(got) != 1 || got[0] != "_xsrf=abc; theme=dark" {
		t.Fatalf("cookies %q, want the app's own only", got)
	}
}

func TestTheCacheKeepsAnswersForItsTTLOnly(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newCache(5*time.Second, func() time.Time { return now })
	k := keyOf("kq_secret", 'a', "t1")
	c.put(k, []*Instance{{ID: "t1"}})
	if _, ok := c.get(k); !ok {
		t.Fatal("a fresh answer was not kept")
	}
	if _, ok := c.get(keyOf("kq_other", 'a', "t1")); ok {
		t.Fatal("another credential was given the answer")
	}
	now = now.Add(5 * time.Second)
	if _, ok := c.get(k); ok {
		t.Fatal("an answer outlived the TTL")
	}
	c.put(k, []*Instance{{ID: "t1"}})
	c.dropPrefix("/apps/t1")
	if _, ok := c.get(k); ok {
		t.Fatal("dropPrefix left the instance's answer")
	}
}

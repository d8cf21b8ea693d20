package runenv

import (
	"strings"
	"testing"
)

func TestCheckMount(t *testing.T) {
	t.Parallel()
	for _, m := range []string{"/data:/data", "/data/hf-cache:/data/hf-cache:ro", "/scratch:/mnt/scratch:rw", "/:/host:ro", "/a/./b:/c/"} {
		if err := CheckMount(m); err != nil {
			t.Errorf("CheckMount(%q) = %v, want nil", m, err)
		}
	}
	for m, want := range map[string]string{
		"":                  "must be /host/path:/container/path",
		"/data":             "must be /host/path:/container/path",
		"/a:/b:ro:z":        "must be /host/path:/container/path",
		"data:/data":        `host path "data" must be absolute`,
		"/data:data":        `container path "data" must be absolute`,
		"/data/../etc:/etc": "must not hold a '..' component",
		"/data:/x/..":       "must not hold a '..' component",
		"/data:/data:rx":    "the mode is ro (read-only) or rw (read-write)",
		"/data:/data:":      "the mode is ro",
		"/data:/":           "the container path cannot be /",
		"/data://":          "the container path cannot be /",
		"/a,b:/a":           "holds a comma",
		"/my data:/data":    "holds a space or a control character",
		"/data:/data\n":     "holds a space or a control character",
		"/" + strings.Repeat("a", MaxMountLength) + ":/a": "longer than",
	} {
		err := CheckMount(m)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckMount(%q) = %v, want an error with %q", m, err, want)
		}
	}
	if got := MountTarget("/a:/data/:ro"); got != "/data" {
		t.Errorf("MountTarget = %q", got)
	}
}

func TestValidName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"HF_HOME": true, "_x": true, "a1": true, "1A": false, "HF-HOME": false, "": false, "A B": false,
		strings.Repeat("A", MaxNameLength): true, strings.Repeat("A", MaxNameLength+1): false,
	} {
		if got := ValidName(name); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestLooksLikeCredential(t *testing.T) {
	t.Parallel()
	for _, kv := range [][2]string{{"HF_TOKEN", "x"}, {"db_password", "x"}, {"OPENAI_API_KEY", "x"}, {"AWS_ACCESS_KEY_ID", "x"},
		{"GH", "ghp_" + strings.Repeat("a", 36)}, {"K", "-----BEGIN RSA PRIVATE KEY-----"}} {
		if !LooksLikeCredential(kv[0], kv[1]) {
			t.Errorf("%s=%s is not taken for a credential", kv[0], kv[1])
		}
	}
	for _, kv := range [][2]string{{"HF_HOME", "/data/hf"}, {"MAX_TOKENS", "4096"}, {"TOKENIZER", "bpe"}, {"HF_TOKEN", ""}} {
		if LooksLikeCredential(kv[0], kv[1]) {
			t.Errorf("%s=%s is taken for a credential", kv[0], kv[1])
		}
	}
}

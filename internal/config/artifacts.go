package config

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultArtifactMaxBytes is the largest artifact the control plane
// stores (KLIQUE_ARTIFACT_MAX_BYTES): big enough for a fine-tuned small
// model's adapter, an evaluation report or a confusion matrix; a larger
// output stays at the run's output destination and comes home as a
// pointer ("only pointers come home").
const DefaultArtifactMaxBytes = 256 << 20

// Artifacts is where stored artifacts go (docs/operations.md).
type Artifacts struct {
	// Bucket, when set, keeps artifacts in an S3-compatible bucket
	// (KLIQUE_ARTIFACT_BUCKET=s3://bucket/prefix) instead of the data
	// directory. Endpoint (KLIQUE_ARTIFACT_ENDPOINT), Region
	// (KLIQUE_ARTIFACT_REGION) and PathStyle (KLIQUE_ARTIFACT_PATH_STYLE)
	// reach S3-compatible services; credentials come from the standard
	// AWS chain (AWS_ACCESS_KEY_ID…, shared files, instance or pod roles).
	Bucket    string
	Endpoint  string
	Region    string
	PathStyle bool
	// MaxBytes is the largest artifact stored (KLIQUE_ARTIFACT_MAX_BYTES).
	MaxBytes int64
}

// artifactsFromEnv reads the KLIQUE_ARTIFACT_* settings.
func artifactsFromEnv(getenv func(string) string) (Artifacts, error) {
	a := Artifacts{Bucket: getenv("KLIQUE_ARTIFACT_BUCKET"), Endpoint: getenv("KLIQUE_ARTIFACT_ENDPOINT"),
		Region: getenv("KLIQUE_ARTIFACT_REGION"), MaxBytes: DefaultArtifactMaxBytes}
	if a.Bucket != "" && (!strings.HasPrefix(a.Bucket, "s3://") || len(a.Bucket) <= len("s3://")) {
		return a, fmt.Errorf("KLIQUE_ARTIFACT_BUCKET=%q: give an s3://bucket/prefix URL (leave it unset to keep artifacts in the data directory)", a.Bucket)
	}
	switch v := getenv("KLIQUE_ARTIFACT_PATH_STYLE"); v {
	case "", "false", "0":
	case "true", "1":
		a.PathStyle = true
	default:
		return a, fmt.Errorf("KLIQUE_ARTIFACT_PATH_STYLE=%q: use true or false", v)
	}
	if v := getenv("KLIQUE_ARTIFACT_MAX_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return a, fmt.Errorf("KLIQUE_ARTIFACT_MAX_BYTES=%q: give a number of bytes, such as 268435456 for 256 MiB", v)
		}
		a.MaxBytes = n
	}
	return a, nil
}

// ArtifactDir is where artifacts are kept when no bucket is set.
func (c *Config) ArtifactDir() string { return filepath.Join(c.DataDir, "artifacts") }

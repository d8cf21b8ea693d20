package server

import (
	"context"
	"fmt"

	"github.com/klique-ai/klique/internal/artifacts"
	"github.com/klique-ai/klique/internal/config"
)

// openArtifacts opens where stored artifacts go: the bucket of
// KLIQUE_ARTIFACT_BUCKET, else the data directory's "artifacts". Replicas
// behind a load balancer need the bucket (or a shared data directory):
// each reads what any other stored.
func openArtifacts(ctx context.Context, cfg *config.Config) (artifacts.Blobs, error) {
	a := cfg.Artifacts
	if a.Bucket == "" {
		b, err := artifacts.NewLocal(cfg.ArtifactDir())
		if err != nil {
			return nil, fmt.Errorf("artifact storage: %w", err)
		}
		return b, nil
	}
	bucket, prefix, err := artifacts.ParseBucketURL(a.Bucket)
	if err != nil {
		return nil, fmt.Errorf("KLIQUE_ARTIFACT_BUCKET: %w", err)
	}
	b, err := artifacts.NewS3(ctx, artifacts.S3Config{Bucket: bucket, Prefix: prefix, Endpoint: a.Endpoint, Region: a.Region, PathStyle: a.PathStyle})
	if err != nil {
		return nil, fmt.Errorf("artifact storage: %w", err)
	}
	return b, nil
}

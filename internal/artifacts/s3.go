package artifacts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// S3Config says where an S3-compatible bucket is. Credentials are not
// here: they come from the standard AWS chain (environment, shared files,
// instance or pod roles) and are never logged.
type S3Config struct {
	// Bucket and Prefix come from KLIQUE_ARTIFACT_BUCKET (s3://bucket/prefix).
	Bucket string
	Prefix string
	// Endpoint is an S3-compatible service's URL (MinIO, Ceph, R2…);
	// empty for AWS itself. Region is the bucket's region.
	Endpoint string
	Region   string
	// PathStyle addresses the bucket in the path (endpoint/bucket/key),
	// as most S3-compatible services need.
	PathStyle bool
}

// ParseBucketURL reads s3://bucket[/prefix].
func ParseBucketURL(raw string) (bucket, prefix string, err error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "s3" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", "", fmt.Errorf("%q is not an s3://bucket/prefix URL", raw)
	}
	return u.Host, strings.Trim(u.Path, "/"), nil
}

// S3 keeps blobs as objects of a bucket, under a prefix.
type S3 struct {
	client *s3.Client
	cfg    S3Config
}

// NewS3 returns a store on a bucket, with credentials from the standard
// AWS chain.
func NewS3(ctx context.Context, c S3Config) (*S3, error) {
	if c.Bucket == "" {
		return nil, errors.New("the artifact bucket is empty: give KLIQUE_ARTIFACT_BUCKET=s3://bucket/prefix")
	}
	opts := []func(*awsconfig.LoadOptions) error{}
	if c.Region != "" {
		opts = append(opts, awsconfig.WithRegion(c.Region))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("load the AWS configuration for the artifact bucket: %w", err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1"
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if c.Endpoint != "" {
			o.BaseEndpoint = aws.String(c.Endpoint)
		}
		o.UsePathStyle = c.PathStyle
		// S3-compatible services do not all take the SDK's default
		// trailing checksums; send them only when an operation needs one.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	return &S3{client: client, cfg: c}, nil
}

// Describe names the bucket and prefix (and endpoint), never credentials.
func (s *S3) Describe() string {
	d := "bucket s3://" + s.cfg.Bucket + "/" + s.cfg.Prefix
	if s.cfg.Endpoint != "" {
		d += " at " + s.cfg.Endpoint
	}
	return d
}

func (s *S3) object(key string) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	if s.cfg.Prefix == "" {
		return key, nil
	}
	return s.cfg.Prefix + "/" + key, nil
}

// Put spools r to a temporary file first: the object's length must be
// known before the upload starts, and a body the platform refuses part
// way (over the limit, wrong hash) then never reaches the bucket.
func (s *S3) Put(ctx context.Context, key string, r io.Reader) error {
	obj, err := s.object(key)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp("", "klique-artifact-*")
	if err != nil {
		return fmt.Errorf("put artifact %s: spool: %w", key, err)
	}
	defer func() {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
	}()
	n, err := io.Copy(tmp, readerWithContext(ctx, r))
	if err != nil {
		return fmt.Errorf("put artifact %s: %w", key, err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("put artifact %s: spool: %w", key, err)
	}
	_, err = s.client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(obj),
		Body: tmp, ContentLength: aws.Int64(n)})
	if err != nil {
		return fmt.Errorf("put artifact %s in the bucket: %w", key, err)
	}
	return nil
}

// Open reads an object.
func (s *S3) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	obj, err := s.object(key)
	if err != nil {
		return nil, err
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(obj)})
	if err != nil {
		var nsk *types.NoSuchKey
		var api smithy.APIError
		if errors.As(err, &nsk) || (errors.As(err, &api) && api.ErrorCode() == "NotFound") {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("open artifact %s in the bucket: %w", key, err)
	}
	return out.Body, nil
}

// Delete removes an object (S3 answers a missing key with success).
func (s *S3) Delete(ctx context.Context, key string) error {
	obj, err := s.object(key)
	if err != nil {
		return err
	}
	if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(obj)}); err != nil {
		return fmt.Errorf("delete artifact %s in the bucket: %w", key, err)
	}
	return nil
}

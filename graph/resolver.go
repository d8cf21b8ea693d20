// Package graph is Klique's GraphQL API: the gqlgen executable schema and its
// resolvers. Resolvers are thin: each one calls the platform service, which
// holds every rule, and converts between GraphQL and platform types.
package graph

//go:generate go tool gqlgen generate

import (
	"encoding/base64"
	"fmt"
	"sort"
	"strconv"

	"github.com/klique-ai/klique/graph/gqlmodel"
	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
)

// Resolver is the root resolver. It holds only the platform, one
// interface per domain (Platforms): a resolver reaches a domain through
// r.Svc.<Domain>.
type Resolver struct {
	Svc Platforms
}

// Page sizes of connections.
const (
	defaultPageSize = 50
	maxPageSize     = 500
)

func pageSize(first *int) (int, error) {
	if first == nil {
		return defaultPageSize, nil
	}
	if *first < 0 || *first > maxPageSize {
		return 0, badInput("first must be between 0 and %d", maxPageSize)
	}
	return *first, nil
}

func encodeCursor(key string) string { return base64.RawURLEncoding.EncodeToString([]byte(key)) }

func decodeCursor(after *string) (string, error) {
	if after == nil || *after == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(*after)
	if err != nil {
		return "", badInput("the cursor %q is not valid; pass the endCursor of a previous page", *after)
	}
	return string(b), nil
}

// badInput is a BAD_USER_INPUT error raised in the GraphQL layer itself
// (malformed arguments), before the platform service is called.
func badInput(format string, args ...any) error {
	return &platform.Error{Code: platform.CodeInvalid, Message: fmt.Sprintf(format, args...)}
}

// paginate cuts a list sorted by key into the page after the cursor.
func paginate[T any](items []T, key func(T) string, first *int, after *string) ([]T, []string, *gqlmodel.PageInfo, error) {
	n, err := pageSize(first)
	if err != nil {
		return nil, nil, nil, err
	}
	from, err := decodeCursor(after)
	if err != nil {
		return nil, nil, nil, err
	}
	var out []T
	var cursors []string
	more := false
	for _, it := range items {
		k := key(it)
		if from != "" && k <= from {
			continue
		}
		if len(out) == n {
			more = true
			break
		}
		out = append(out, it)
		cursors = append(cursors, encodeCursor(k))
	}
	return out, cursors, pageInfo(cursors, more), nil
}

func pageInfo(cursors []string, more bool) *gqlmodel.PageInfo {
	info := &gqlmodel.PageInfo{HasNextPage: more}
	if len(cursors) > 0 {
		info.EndCursor = &cursors[len(cursors)-1]
	}
	return info
}

// storePage turns connection arguments into a store page that asks for one
// more item than wanted, to learn whether there is a next page.
func storePage(first *int, after *string) (platform.Page, int, error) {
	n, err := pageSize(first)
	if err != nil {
		return platform.Page{}, 0, err
	}
	from, err := decodeCursor(after)
	if err != nil {
		return platform.Page{}, 0, err
	}
	return platform.Page{After: from, Limit: n + 1}, n, nil
}

// seqPage is storePage for lists keyed by a sequence number.
func seqPage(first *int, after *string) (platform.Page, int, error) {
	p, n, err := storePage(first, after)
	if err == nil && p.After != "" {
		if _, perr := strconv.ParseInt(p.After, 10, 64); perr != nil {
			return p, n, badInput("the cursor is not valid; pass the endCursor of a previous page")
		}
	}
	return p, n, err
}

// trim cuts a store result fetched with storePage to n items and builds
// the cursors.
func trim[T any](items []T, n int, key func(T) string) ([]T, []string, *gqlmodel.PageInfo) {
	more := len(items) > n
	if more {
		items = items[:n]
	}
	cursors := make([]string, len(items))
	for i, it := range items {
		cursors[i] = encodeCursor(key(it))
	}
	return items, cursors, pageInfo(cursors, more)
}

func changes(res *platform.EstateResult) []*estate.Change {
	out := make([]*estate.Change, len(res.Changes))
	for i := range res.Changes {
		out[i] = &res.Changes[i]
	}
	return out
}

func warnings(ws []estate.Warning) []*estate.Warning {
	out := make([]*estate.Warning, len(ws))
	for i := range ws {
		out[i] = &ws[i]
	}
	return out
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// descKey encodes a number so that larger numbers sort first as strings.
func descKey(v int64) string {
	return fmt.Sprintf("%020d", int64(^uint64(0)>>1)-v)
}

// sorted returns a copy of items sorted by key.
func sorted[T any](items []T, key func(T) string) []T {
	out := append([]T(nil), items...)
	sort.SliceStable(out, func(i, j int) bool { return key(out[i]) < key(out[j]) })
	return out
}

// deleted builds the payload of a deletion.
func deleted(res *platform.EstateResult, err error) (*gqlmodel.DeletePayload, error) {
	if err != nil {
		return nil, err
	}
	return &gqlmodel.DeletePayload{ID: res.ID, Changes: changes(res), Warnings: warnings(res.Warnings)}, nil
}

// pointers turns a list of values into a list of pointers, for gqlgen.
func pointers[T any](vs []T) []*T {
	out := make([]*T, len(vs))
	for i := range vs {
		out[i] = &vs[i]
	}
	return out
}

// optionalPool turns a pool that is gone into null.
func optionalPool(p *model.Pool, err error) (*model.Pool, error) {
	if platform.ErrorCode(err) == platform.CodeNotFound {
		return nil, nil
	}
	return p, err
}

// nonNil gives an empty map for nil, for non-null GraphQL maps.
func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// nullIfEmpty turns an unset text into null, for optional GraphQL strings.
func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// gatewayPayload builds the payload of a change of the gateway's
// configuration.
func gatewayPayload(res *platform.EstateResult, err error) (*gqlmodel.GatewayPayload, error) {
	if err != nil {
		return nil, err
	}
	return &gqlmodel.GatewayPayload{Gateway: &res.Estate.Gateway, Changes: changes(res), Warnings: warnings(res.Warnings)}, nil
}

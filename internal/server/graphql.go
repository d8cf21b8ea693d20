package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/klique-ai/klique/graph"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/platform"
)

// ComplexityLimit bounds how much one GraphQL operation may ask for, so that
// a deeply nested query cannot tie up the server.
const ComplexityLimit = 2000

// newGraphQL builds the GraphQL handler: explicit transports (no deprecated
// default server), a complexity limit, introspection for signed-in callers
// only, and errors that carry extensions.code and never internal details.
func newGraphQL(svc *platform.Service, log *slog.Logger, m *metrics) *handler.Server {
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Svc: svc}}))
	srv.AddTransport(transport.Options{})
	srv.AddTransport(transport.GET{})
	srv.AddTransport(transport.POST{})
	srv.SetQueryCache(lru.New[*ast.QueryDocument](1000))
	srv.Use(extension.Introspection{})
	srv.Use(extension.FixedComplexityLimit(ComplexityLimit))
	srv.Use(extension.AutomaticPersistedQuery{Cache: lru.New[string](100)})

	srv.AroundOperations(func(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
		oc := graphql.GetOperationContext(ctx)
		if _, ok := identity.PrincipalFrom(ctx); !ok {
			oc.DisableIntrospection = true
		}
		start := time.Now()
		h := next(ctx)
		return func(ctx context.Context) *graphql.Response {
			resp := h(ctx)
			kind := "unknown"
			if oc.Operation != nil {
				kind = string(oc.Operation.Operation)
			}
			outcome := "ok"
			if resp != nil && len(resp.Errors) > 0 {
				outcome = "error"
			}
			m.graphqlOps.WithLabelValues(kind, outcome).Inc()
			m.graphqlSeconds.WithLabelValues(kind).Observe(time.Since(start).Seconds())
			return resp
		}
	})

	srv.SetErrorPresenter(func(ctx context.Context, err error) *gqlerror.Error {
		gerr := graphql.DefaultErrorPresenter(ctx, err)
		var pe *platform.Error
		if errors.As(err, &pe) {
			gerr.Message = pe.Message
			ext := map[string]any{"code": string(pe.Code)}
			if len(pe.Problems) > 1 {
				ext["problems"] = pe.Problems
			}
			gerr.Extensions = ext
			return gerr
		}
		if errors.Is(err, identity.ErrUnauthenticated) {
			gerr.Message = err.Error()
			gerr.Extensions = map[string]any{"code": string(platform.CodeUnauthenticated)}
			return gerr
		}
		var ge *gqlerror.Error
		if errors.As(err, &ge) && ge.Extensions != nil {
			// Parse and validation errors already say what is wrong.
			return gerr
		}
		if errors.As(err, &ge) && ge.Err == nil && ge.Rule != "" {
			return gerr
		}
		if errors.Is(err, context.Canceled) {
			gerr.Message = "request cancelled"
			gerr.Extensions = map[string]any{"code": "CANCELLED"}
			return gerr
		}
		if ge != nil && ge.Err == nil {
			// Argument coercion errors from gqlgen ("cannot be null", a bad
			// enum value) say what is wrong as they are.
			if gerr.Extensions == nil {
				gerr.Extensions = map[string]any{"code": string(platform.CodeInvalid)}
			}
			return gerr
		}
		log.ErrorContext(ctx, "graphql resolver failed", "err", err, "path", gerr.Path.String(), "request_id", identity.RequestIDFrom(ctx))
		gerr.Message = platform.PublicMessage(err)
		gerr.Extensions = map[string]any{"code": string(platform.CodeInternal), "requestId": identity.RequestIDFrom(ctx)}
		return gerr
	})

	srv.SetRecoverFunc(func(ctx context.Context, v any) error {
		log.ErrorContext(ctx, "graphql resolver panicked", "panic", fmt.Sprint(v), "stack", string(debug.Stack()), "request_id", identity.RequestIDFrom(ctx))
		return errors.New("internal error")
	})
	return srv
}

package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
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
	schema := graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Svc: svc}})
	srv := handler.New(schema)
	srv.AddTransport(transport.Options{})
	srv.AddTransport(transport.GET{})
	srv.AddTransport(transport.POST{})
	srv.AddTransport(unsupportedTransport{})
	srv.SetQueryCache(lru.New[*ast.QueryDocument](1000))
	srv.Use(extension.Introspection{})
	srv.Use(extension.FixedComplexityLimit(ComplexityLimit))
	srv.Use(extension.AutomaticPersistedQuery{Cache: lru.New[string](100)})
	srv.Use(strictNumbers{schema: schema.Schema()})

	// Introspection needs a signed-in caller. DisableIntrospection below
	// stops it for anonymous callers; refusing the root fields here first
	// gives them an UNAUTHENTICATED error instead of an internal one.
	srv.AroundRootFields(func(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
		if _, ok := identity.PrincipalFrom(ctx); !ok {
			if f := graphql.GetRootFieldContext(ctx); f != nil && (f.Field.Name == "__schema" || f.Field.Name == "__type") {
				graphql.AddError(ctx, &platform.Error{Code: platform.CodeUnauthenticated,
					Message: "sign in to read the schema: send an API key or access token as 'Authorization: Bearer <credential>'"})
				return graphql.Null
			}
		}
		return next(ctx)
	})

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

// unsupportedTransport answers what no other transport takes (a POST that is
// not JSON, a PUT) with an error that carries a code, instead of gqlgen's
// bare "transport not supported". It must be added last.
type unsupportedTransport struct{}

func (unsupportedTransport) Supports(*http.Request) bool { return true }

func (unsupportedTransport) Do(w http.ResponseWriter, r *http.Request, _ graphql.GraphExecutor) {
	if r.Method == http.MethodPost {
		writeError(w, r, http.StatusUnsupportedMediaType, string(platform.CodeInvalid),
			"send GraphQL requests as JSON with 'Content-Type: application/json'")
		return
	}
	w.Header().Set("Allow", "GET, POST, OPTIONS")
	writeError(w, r, http.StatusMethodNotAllowed, string(platform.CodeInvalid),
		fmt.Sprintf("GraphQL takes GET or POST requests, not %s", r.Method))
}

// strictNumbers refuses variables that give an Int or a Float as a JSON
// string ("4" for 4). The GraphQL spec requires that, and gqlparser's
// variable coercion lets numeric strings through.
type strictNumbers struct{ schema *ast.Schema }

func (strictNumbers) ExtensionName() string                   { return "StrictNumbers" }
func (strictNumbers) Validate(graphql.ExecutableSchema) error { return nil }

func (s strictNumbers) MutateOperationContext(_ context.Context, rc *graphql.OperationContext) *gqlerror.Error {
	if rc.Operation == nil {
		return nil
	}
	for _, def := range rc.Operation.VariableDefinitions {
		if err := s.check(def.Type, rc.Variables[def.Variable], "$"+def.Variable); err != nil {
			return err
		}
	}
	return nil
}

func (s strictNumbers) check(t *ast.Type, v any, where string) *gqlerror.Error {
	if t == nil || v == nil {
		return nil
	}
	if t.Elem != nil {
		list, ok := v.([]any)
		if !ok {
			return s.check(t.Elem, v, where) // one value given for a list
		}
		for i, e := range list {
			if err := s.check(t.Elem, e, fmt.Sprintf("%s[%d]", where, i)); err != nil {
				return err
			}
		}
		return nil
	}
	switch t.NamedType {
	case "Int", "Float":
		if str, ok := v.(string); ok {
			err := gqlerror.Errorf("%s must be a number (%s), not the string %q", where, t.NamedType, str)
			errcode.Set(err, errcode.ValidationFailed)
			return err
		}
		return nil
	}
	def := s.schema.Types[t.NamedType]
	obj, ok := v.(map[string]any)
	if def == nil || def.Kind != ast.InputObject || !ok {
		return nil
	}
	for _, f := range def.Fields {
		if err := s.check(f.Type, obj[f.Name], where+"."+f.Name); err != nil {
			return err
		}
	}
	return nil
}

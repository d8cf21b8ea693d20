package server

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the server's Prometheus metrics, on a registry of its own so
// that several servers in one test process do not collide.
type metrics struct {
	registry       *prometheus.Registry
	httpRequests   *prometheus.CounterVec
	httpSeconds    *prometheus.HistogramVec
	graphqlOps     *prometheus.CounterVec
	graphqlSeconds *prometheus.HistogramVec
	authFailures   *prometheus.CounterVec
	// graphqlRefused counts documents refused by DocumentLimits, by reason;
	// graphqlValidated and graphqlComplexity count the expensive steps they
	// are refused before.
	graphqlRefused    *prometheus.CounterVec
	graphqlValidated  prometheus.Counter
	graphqlComplexity prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "klique_http_requests_total", Help: "HTTP requests by route and status code.",
		}, []string{"route", "code"}),
		httpSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "klique_http_request_duration_seconds", Help: "HTTP request latency by route.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"route"}),
		graphqlOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "klique_graphql_operations_total", Help: "GraphQL operations by type and outcome.",
		}, []string{"operation", "outcome"}),
		graphqlSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "klique_graphql_operation_duration_seconds", Help: "GraphQL operation latency by type.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"operation"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "klique_auth_failures_total", Help: "Refused credentials by reason.",
		}, []string{"reason"}),
		graphqlRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "klique_graphql_documents_refused_total", Help: "GraphQL documents refused before validation for their size, by reason.",
		}, []string{"reason"}),
		graphqlValidated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "klique_graphql_documents_validated_total", Help: "GraphQL documents validated against the schema (not found in the query cache).",
		}),
		graphqlComplexity: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "klique_graphql_complexity_computed_total", Help: "GraphQL operations whose complexity was computed.",
		}),
	}
	m.registry.MustRegister(m.httpRequests, m.httpSeconds, m.graphqlOps, m.graphqlSeconds, m.authFailures,
		m.graphqlRefused, m.graphqlValidated, m.graphqlComplexity,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

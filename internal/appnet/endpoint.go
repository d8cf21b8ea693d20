package appnet

import (
	"net"
	"strings"
)

// A serving instance is an endpoint of a static route like any model
// server: the gateway balances calls across a route's base URLs. An
// instance's base URL names it under the reserved domain .invalid
// (RFC 2606: it never resolves), so that a call cannot leave for the
// network by mistake; the gateway's transport recognises the name and
// opens the connection through a Reacher instead of the resolver.

// InstanceDomain is the reserved domain of instance endpoints.
const InstanceDomain = ".app.klique.invalid"

// InstanceBaseURL is the base URL of a serving instance's OpenAI API, as a
// route endpoint: http://<task id>.app.klique.invalid/v1.
func InstanceBaseURL(taskID string) string {
	return "http://" + taskID + InstanceDomain + "/v1"
}

// InstanceOf returns the task id of an instance endpoint's address (a
// host, or host:port as a dialer is given it), and whether it is one.
func InstanceOf(addr string) (string, bool) {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	id, ok := strings.CutSuffix(strings.ToLower(host), InstanceDomain)
	if !ok || id == "" || strings.Contains(id, ".") {
		return "", false
	}
	return id, true
}

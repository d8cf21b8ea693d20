// Package mcp is the MCP server: the platform's operations as tools for
// coding agents (Claude Code, desktop assistants, a team's own agent),
// served over MCP's streamable HTTP transport at /mcp on the control plane.
//
// Every call carries its user's own bearer credential (an API key or an
// access token) and runs under that user's identity, role and policy: the
// same compute resources, the same audit trail and the same ledger as
// GraphQL and the CLI. The agent never gets a route of its own to the
// hardware. Each tool is a thin wrapper over one or two operations of the
// platform service; the rules live there.
//
// Tools are listed by role: a viewer is not offered (and cannot call) the
// tools that change anything or spend a budget. Arguments are checked
// before anything runs, and a bad argument or a refusal comes back as a
// tool error (isError) whose text says why in words an agent can relay,
// never as a protocol failure. Every call is recorded in the audit trail
// with channel mcp and the acting user: a change through the platform's own
// entry (task.enqueued, task.aborted), every other call, refused or not, as
// an mcp.tool_called entry.
package mcp

//go:generate go run ./internal/gentools ../README.md

// Package mcp will hold the MCP server: the platform's operations as tools
// for coding agents, under their user's identity (issue 6). Nothing is
// implemented here yet.
package mcp

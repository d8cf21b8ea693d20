// Package gateway will hold the OpenAI-compatible LLM gateway: aliases,
// static routes and providers, token budgets, Redis rate limits, guardrails
// and metering onto the shared ledger (issue 4). Nothing is implemented here
// yet.
package gateway

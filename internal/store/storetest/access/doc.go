// Package access is the part of the store conformance suite (package
// storetest) on who may act: tenants, users, groups and their members, and
// API keys. Exercise runs it; each function here is one group of subtests.
package access

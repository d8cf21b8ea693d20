// Package gql is the CLI's GraphQL operations, typed and generated from the
// server's schema (schema/*.graphqls) by genqlient: each operation in the
// *.graphql files here is a function of generated.go that takes a
// graphql.Client (the CLI's *client.Client, with its server, credential
// and error handling) and returns the answer as Go types. A query that no
// longer fits the schema fails `make generate`, not a command at run time;
// TestGeneratedIsCurrent fails when generated.go is not what the schema and
// the operations make. docs/cli.md says how to add an operation.
package gql

//go:generate go tool genqlient genqlient.yaml

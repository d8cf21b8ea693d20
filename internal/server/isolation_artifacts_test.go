package server_test

// artifactIsolationCases are the isolation cases of artifacts: only the
// run's owner publishes, and nobody else learns the run exists.
var artifactIsolationCases = []isoCase{
	{field: "Mutation.publishArtifactPointer", as: otherAdmin, name: "cannot publish on alice's task",
		query: `mutation($id: ID!) { publishArtifactPointer(input: {task: $id, name: "x", url: "s3://b/x"}) { name } }`,
		vars:  map[string]any{"id": ref("task")}, code: notFound},
	{field: "Mutation.publishArtifactPointer", as: otherMember, name: "cannot publish on alice's task",
		query: `mutation($id: ID!) { publishArtifactPointer(input: {task: $id, name: "x", url: "s3://b/x"}) { name } }`,
		vars:  map[string]any{"id": ref("task")}, code: notFound},
	{field: "Mutation.publishArtifactPointer", as: victor, name: "cannot publish on alice's task",
		query: `mutation($id: ID!) { publishArtifactPointer(input: {task: $id, name: "x", url: "s3://b/x"}) { name } }`,
		vars:  map[string]any{"id": ref("task")}, code: notFound},
	{field: "Mutation.publishArtifactPointer", as: viewer, name: "may see but not publish on alice's task",
		query: `mutation($id: ID!) { publishArtifactPointer(input: {task: $id, name: "x", url: "s3://b/x"}) { name } }`,
		vars:  map[string]any{"id": ref("task")}, code: forbidden},
}

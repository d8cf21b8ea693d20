package server_test

// pipelineDef names tenant default's project and a compute resource by
// name, as another tenant's admin or another group's member might try.
const pipelineDef = "name: steal\nproject: fraud-models\nsteps:\n  - {name: a, computeResource: 1 GPU, command: [echo]}\n"

// pipelineIsolationCases are the isolation cases of pipeline runs: alice's
// run of group ml-research is unknown to another tenant and to another
// group's member, whatever they ask.
var pipelineIsolationCases = []isoCase{
	{field: "Query.pipelineRuns", as: otherAdmin, name: "sees none of tenant default's pipeline runs",
		query: `{ pipelineRuns { id name } }`, check: wantPlainList("pipelineRuns", []string{"id"})},
	{field: "Query.pipelineRuns", as: victor, name: "sees none of ml-research's pipeline runs",
		query: `{ pipelineRuns { id name } }`, check: wantPlainList("pipelineRuns", []string{"id"})},
	{field: "Query.pipelineRuns", as: victor, name: "is told ml-research's project is not theirs to list",
		query: `{ pipelineRuns(project: "fraud-models") { id name } }`, code: notFound},
	{field: "Query.pipelineRun", as: otherAdmin, name: "cannot read alice's pipeline run",
		query: `query($id: ID!) { pipelineRun(id: $id) { id } }`, vars: map[string]any{"id": ref("pipeline run")}, code: notFound},
	{field: "Query.pipelineRun", as: victor, name: "cannot read alice's pipeline run",
		query: `query($id: ID!) { pipelineRun(id: $id) { id } }`, vars: map[string]any{"id": ref("pipeline run")}, code: notFound},
	{field: "Mutation.abortPipelineRun", as: otherAdmin, name: "cannot abort alice's pipeline run",
		query: `mutation($id: ID!) { abortPipelineRun(id: $id) { id } }`, vars: map[string]any{"id": ref("pipeline run")}, code: notFound},
	{field: "Mutation.abortPipelineRun", as: victor, name: "cannot abort alice's pipeline run",
		query: `mutation($id: ID!) { abortPipelineRun(id: $id) { id } }`, vars: map[string]any{"id": ref("pipeline run")}, code: notFound},
	{field: "Mutation.runPipeline", as: otherAdmin, name: "cannot run a pipeline in tenant default's project",
		query: `mutation($d: String!) { runPipeline(input: {definition: $d}) { id } }`, vars: map[string]any{"d": pipelineDef}, code: badInput},
	{field: "Mutation.runPipeline", as: victor, name: "cannot run a pipeline in ml-research's project",
		query: `mutation($d: String!) { runPipeline(input: {definition: $d}) { id } }`, vars: map[string]any{"d": pipelineDef}, code: badInput},
}

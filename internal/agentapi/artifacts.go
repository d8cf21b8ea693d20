package agentapi

// Artifacts through the worker protocol (docs/agent-protocol.md). A worker
// publishes what a task of its current attempt produced, and fetches the
// inputs of a task it holds; both carry the attempt as ?attempt=N, and a
// stale attempt is refused with 409 like every report.
const (
	// PathArtifacts: PUT PathTasks+"{id}/artifacts/{name}?attempt=N" with
	// the raw bytes (Content-Type kept; HeaderSHA256, when sent, checked
	// against what arrived). The name may hold '/'.
	PathArtifacts = "artifacts"
	// PathPointers: POST PathTasks+"{id}/pointers" with a PointerRequest.
	PathPointers = "pointers"
	// PathInputs: GET PathTasks+"{id}/inputs/{name}?attempt=N" answers a
	// stored input's bytes (with HeaderSHA256), or a pointer input with
	// HeaderPointer and no body.
	PathInputs = "inputs"
)

// Headers of artifact bodies, on the worker protocol and the public
// artifact endpoint alike.
const (
	HeaderSHA256  = "X-Klique-SHA256"
	HeaderPointer = "X-Klique-Pointer"
)

// Input is one input of an assignment: what the task calls it, and the
// run and artifact it comes from.
type Input struct {
	Name     string `json:"name"`
	TaskID   string `json:"taskId"`
	Artifact string `json:"artifact"`
}

// PointerRequest registers a pointer artifact for an attempt.
type PointerRequest struct {
	Attempt     int    `json:"attempt"`
	Name        string `json:"name"`
	URL         string `json:"url"`
	Size        int64  `json:"size,omitempty"`
	SHA256      string `json:"sha256,omitempty"`
	ContentType string `json:"contentType,omitempty"`
}

// ArtifactResponse describes a published artifact.
type ArtifactResponse struct {
	Name        string `json:"name"`
	Size        int64  `json:"size"`
	SHA256      string `json:"sha256,omitempty"`
	ContentType string `json:"contentType"`
	Pointer     string `json:"pointer,omitempty"`
}

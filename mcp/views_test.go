package mcp_test

// What the tools answer, as a client decodes it.
type task struct {
	ID, Name, Status, Reason       string
	Position                       int
	ComputeResource, Group         string
	Project, Owner, Size, Pool     string
	Worker                         string
	Attempt                        int
	ExitCode                       *int
	Command                        []string
	Parameters                     map[string]string
	Tags                           []string
	Outputs                        []string
	ClonedFrom                     *struct{ ID, Name string }
	CreatedAt, PlacedAt            string
	StartedAt, FinishedAt          string
	Repository, Commit, EntryPoint string
}

type taskList struct {
	Tasks      []task
	NextCursor string
}

type computeView struct {
	User, Role, Tenant string
	Groups             []struct {
		Group                      string
		ReservationGPUs, LimitGPUs int
		HeldGPUs                   float64
		WaitingTasks               int
		Budget                     *struct {
			Period           string
			Hours, LeftHours float64
			UsedUp           bool
			ResetsAt         string
		}
		ComputeResources []struct {
			Name, Size string
			TimeWeight float64
			Queued     int
			HeadWaits  string
		}
	}
	Projects []struct{ Name, Group string }
}

type logsView struct {
	Task   struct{ ID, Name string }
	Status string
	Lines  []struct {
		Seq          int64
		Stream, Line string
	}
	LastSeq   int64
	Truncated bool
}

type metricsView struct {
	Task    struct{ ID, Name string }
	Metrics []struct {
		Name  string
		Value float64
		Step  int64
		Seq   int64
	}
	LastSeq int64
}

type comparison struct {
	Tasks      []struct{ ID, Name, Status string }
	Parameters []struct {
		Name    string
		Values  []string
		Differs bool
	}
	Metrics []struct {
		Name    string
		Values  []*float64
		Differs bool
	}
}

type usageView struct {
	From, To string
	Rows     []struct {
		Keys               map[string]string
		GPUHours           float64
		Calls, InputTokens int64
	}
}

type aliases struct {
	Aliases []struct{ Name, Description string }
}

type answer struct {
	Alias, Project, Model, Content string
	InputTokens, OutputTokens      int64
}

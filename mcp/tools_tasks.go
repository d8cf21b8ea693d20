package mcp

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
)

// statuses are the task statuses, for filters.
var statuses = []string{
	string(model.TaskQueued), string(model.TaskPlaced), string(model.TaskRunning),
	string(model.TaskCompleted), string(model.TaskFailed), string(model.TaskAborted), string(model.TaskLocal),
}

type enqueueArgs struct {
	Name            string `json:"name" jsonschema:"a short name for the task, such as train or eval-lr-0.01"`
	ComputeResource string `json:"computeResource" jsonschema:"the compute resource to send it to, by name (such as 1 GPU): list_compute_resources lists yours"`
	Project         string `json:"project,omitempty" jsonschema:"the project it belongs to (needed unless the credential is scoped to one project)"`
	Group           string `json:"group,omitempty" jsonschema:"the group whose compute resource is meant, when several of your groups have one of that name"`
	// What it runs: a command, or a repository at a commit with an entry
	// point.
	Command        []string          `json:"command,omitempty" jsonschema:"the program and its arguments, such as [\"python\", \"train.py\", \"--epochs\", \"3\"]"`
	Repository     string            `json:"repository,omitempty" jsonschema:"a git repository to check out (with entryPoint, or with command run inside it)"`
	Commit         string            `json:"commit,omitempty" jsonschema:"the commit of the repository to run"`
	Diff           string            `json:"diff,omitempty" jsonschema:"uncommitted changes to apply to the repository, as git diff prints them"`
	EntryPoint     string            `json:"entryPoint,omitempty" jsonschema:"the script of the repository to run, such as train.py"`
	WorkingDir     string            `json:"workingDir,omitempty"`
	Packages       []string          `json:"packages,omitempty" jsonschema:"Python packages to install before it runs"`
	Image          string            `json:"image,omitempty" jsonschema:"the container image (else the compute resource's)"`
	Parameters     map[string]string `json:"parameters,omitempty" jsonschema:"named parameters (hyperparameters) of the run, recorded with it and compared by compare_tasks"`
	Env            map[string]string `json:"env,omitempty" jsonschema:"environment variables (never secrets: name those in secrets)"`
	Secrets        []string          `json:"secrets,omitempty" jsonschema:"names of vault secrets the worker puts in the task's environment"`
	Tags           []string          `json:"tags,omitempty" jsonschema:"labels of the task (letters, digits, '-', '_', '.', ':', '/'); a schedule can start when a task of a project completes with a tag"`
	IdempotencyKey string            `json:"idempotencyKey,omitempty" jsonschema:"a key of your choice (a UUID) that makes a retry safe: calling again with the same key and arguments within 24 hours returns the task the first call created instead of a second one; the same key with other arguments is refused"`
}

type taskArgs struct {
	ID string `json:"id" jsonschema:"the task's id, as enqueue_task or list_tasks gave it"`
}

type listTasksArgs struct {
	Status          []string `json:"status,omitempty" jsonschema:"only tasks in these statuses"`
	ComputeResource string   `json:"computeResource,omitempty" jsonschema:"only tasks sent to this compute resource"`
	Project         string   `json:"project,omitempty" jsonschema:"only tasks of this project"`
	Group           string   `json:"group,omitempty" jsonschema:"only tasks of this group"`
	Mine            bool     `json:"mine,omitempty" jsonschema:"only your own tasks (else every task you may see: yours and your groups')"`
	Limit           int      `json:"limit,omitempty" jsonschema:"how many tasks, newest first (default 20, at most 100)"`
	Cursor          string   `json:"cursor,omitempty" jsonschema:"the nextCursor of the previous page"`
}

type taskList struct {
	Tasks      []*taskView `json:"tasks" jsonschema:"newest first"`
	NextCursor string      `json:"nextCursor,omitempty" jsonschema:"pass as cursor for the next page; absent on the last page"`
}

type logsArgs struct {
	ID    string `json:"id" jsonschema:"the task's id"`
	Tail  int    `json:"tail,omitempty" jsonschema:"read the last N lines (default 100, at most 5000)"`
	After int64  `json:"after,omitempty" jsonschema:"read on from here: the lastSeq of a previous page, oldest first"`
	Limit int    `json:"limit,omitempty" jsonschema:"with after: how many lines (default 500, at most 5000)"`
}

type logLine struct {
	Seq     int64  `json:"seq"`
	At      string `json:"at"`
	Attempt int    `json:"attempt"`
	Stream  string `json:"stream" jsonschema:"stdout, stderr or worker (what the worker says about the task)"`
	Line    string `json:"line"`
}

type logsView struct {
	Task      taskRef   `json:"task"`
	Status    string    `json:"status"`
	Lines     []logLine `json:"lines"`
	LastSeq   int64     `json:"lastSeq" jsonschema:"pass as after to read the lines printed since"`
	Truncated bool      `json:"truncated" jsonschema:"the task's log reached its limit: later lines were counted, not kept"`
}

type metricsArgs struct {
	ID    string `json:"id" jsonschema:"the task's id"`
	Name  string `json:"name,omitempty" jsonschema:"one metric's series, point by point (else the last value of every metric)"`
	After int64  `json:"after,omitempty" jsonschema:"with name: the points after this seq (the lastSeq of a previous page)"`
	Limit int    `json:"limit,omitempty" jsonschema:"with name: how many points (default 1000, at most 10000)"`
}

type metricPoint struct {
	Name    string  `json:"name"`
	Value   float64 `json:"value"`
	Step    int64   `json:"step,omitempty"`
	At      string  `json:"at"`
	Seq     int64   `json:"seq"`
	Attempt int     `json:"attempt"`
}

type metricsView struct {
	Task    taskRef       `json:"task"`
	Status  string        `json:"status"`
	Metrics []metricPoint `json:"metrics" jsonschema:"the last value of each metric, or the series asked for"`
	LastSeq int64         `json:"lastSeq,omitempty" jsonschema:"with name: pass as after to read on"`
}

type abortArgs struct {
	ID     string `json:"id" jsonschema:"the task's id"`
	Reason string `json:"reason,omitempty" jsonschema:"why, for the task's record"`
}

type cloneArgs struct {
	ID                 string            `json:"id" jsonschema:"the task to clone"`
	ParameterOverrides map[string]string `json:"parameterOverrides,omitempty" jsonschema:"parameters to change or add, such as {\"lr\": \"0.01\"}"`
	Name               string            `json:"name,omitempty" jsonschema:"a name for the new task (else the original's)"`
	ComputeResource    string            `json:"computeResource,omitempty" jsonschema:"another compute resource to send it to"`
	Group              string            `json:"group,omitempty" jsonschema:"the group of that compute resource, when several of yours have its name"`
	Project            string            `json:"project,omitempty" jsonschema:"another project for it"`
	IdempotencyKey     string            `json:"idempotencyKey,omitempty" jsonschema:"a key of your choice (a UUID) that makes a retry safe: calling again with the same key and arguments within 24 hours returns the task the first call created instead of a second one; the same key with other arguments is refused"`
}

type compareArgs struct {
	IDs []string `json:"ids" jsonschema:"the tasks to compare: two to ten ids"`
}

type compareRow struct {
	Name    string   `json:"name"`
	Values  []string `json:"values" jsonschema:"one per task, in the order of tasks; empty when the task has none"`
	Differs bool     `json:"differs"`
}

type compareMetric struct {
	Name      string     `json:"name"`
	Direction string     `json:"direction" jsonschema:"min when lower is better (a loss, an error, a time), else max"`
	Values    []*float64 `json:"values" jsonschema:"the final value (the last reported, by step), one per task in the order of tasks; null when the task reported none"`
	Steps     []*int64   `json:"steps" jsonschema:"the step of each final value"`
	Best      []*float64 `json:"best" jsonschema:"the best value each task reported, by direction"`
	Differs   bool       `json:"differs"`
}

type compareTask struct {
	ID              string `json:"id"`
	Name            string `json:"name"`
	Status          string `json:"status"`
	ComputeResource string `json:"computeResource"`
	Size            string `json:"size"`
	Owner           string `json:"owner"`
	CreatedAt       string `json:"createdAt"`
	RunSeconds      int64  `json:"runSeconds,omitempty" jsonschema:"how long it ran, once finished"`
	Commit          string `json:"commit,omitempty" jsonschema:"the commit it ran, when it ran a repository"`
}

type comparison struct {
	Tasks      []compareTask   `json:"tasks"`
	Parameters []compareRow    `json:"parameters" jsonschema:"every parameter any of the tasks has"`
	Metrics    []compareMetric `json:"metrics" jsonschema:"the final and best value of every metric any of the tasks reported"`
	// CodeDiffers says whether the tasks ran different code.
	CodeDiffers bool `json:"codeDiffers" jsonschema:"whether the tasks ran different code: repository, commit, uncommitted diff or command"`
}

func (s *Server) addTaskTools() {
	addTool(s, toolDef{name: "enqueue_task", title: "Enqueue a task", writes: true, audited: true,
		description: "Send a task to a compute resource: a command, or a repository at a commit with an entry point, with its parameters. " +
			"It runs under your identity and your group's policy: the engine places it within your group's reservation, limit and time budget. " +
			"Answers the task with its status, its place in line and why it waits."}, s.enqueueTask)
	addTool(s, toolDef{name: "get_task", title: "Get a task",
		description: "Where a task is: its status, why it waits (or was preempted, or who aborted it), its place in line, the pool it was placed on, the worker running it, its exit code and outputs."}, s.getTask)
	addTool(s, toolDef{name: "list_tasks", title: "List tasks",
		description: "Your tasks and your groups' tasks, newest first, with filters on status, compute resource, project and group.",
		enums:       map[string][]string{"status": statuses}}, s.listTasks)
	addTool(s, toolDef{name: "get_task_logs", title: "Read a task's log",
		description: "A task's console output: the last lines (tail), or page by page from a sequence number (after)."}, s.taskLogs)
	addTool(s, toolDef{name: "get_task_metrics", title: "Read a task's metrics",
		description: "The metrics a task reported (loss, accuracy, GPU use): the last value of each, or one metric's series."}, s.taskMetrics)
	addTool(s, toolDef{name: "abort_task", title: "Abort a task", writes: true, audited: true, destructive: true, idempotent: true,
		description: "Stop a task that has not ended: a waiting task leaves its queue, a running one is stopped and gives its GPUs back. " +
			"Its owner, a lead of its group or an admin may abort it."}, s.abortTask)
	addTool(s, toolDef{name: "clone_task", title: "Clone a task and enqueue it", writes: true, audited: true,
		description: "Run a task again with changed parameters: a new task, yours, with the original's command or repository and its parameters overlaid with parameterOverrides, enqueued at once."}, s.cloneTask)
	addTool(s, toolDef{name: "compare_tasks", title: "Compare runs",
		description: "Put two or more tasks side by side: their parameters and the final value of each metric, marking what differs."}, s.compareTasks)
}

func (s *Server) enqueueTask(ctx context.Context, in *enqueueArgs) (*taskView, string, error) {
	if err := need(in.Name, "name", "a short name for the task"); err != nil {
		return nil, "", err
	}
	if err := need(in.ComputeResource, "computeResource", "the name of a compute resource, as list_compute_resources lists them"); err != nil {
		return nil, "", err
	}
	if len(in.Command) == 0 && in.Repository == "" {
		return nil, "", badArg("say what to run: give command (the program and its arguments), or repository with entryPoint")
	}
	t, err := s.svc.Tasks.EnqueueTask(ctx, platform.EnqueueInput{
		Name: in.Name, Project: in.Project, ComputeResource: in.ComputeResource, Group: in.Group,
		Spec: model.TaskSpec{Command: in.Command, Repository: in.Repository, Commit: in.Commit, Diff: in.Diff,
			EntryPoint: in.EntryPoint, WorkingDir: in.WorkingDir, Packages: in.Packages, Image: in.Image,
			Parameters: in.Parameters, Env: in.Env, Secrets: in.Secrets},
		Tags:           in.Tags,
		IdempotencyKey: in.IdempotencyKey,
	})
	if err != nil {
		return nil, "", err
	}
	v, err := s.view(ctx, t, false)
	return v, "", err
}

// view is the view of one task.
func (s *Server) view(ctx context.Context, t *model.Task, detail bool) (*taskView, error) {
	n, err := s.namer(ctx)
	if err != nil {
		return nil, err
	}
	return n.task(ctx, t, detail)
}

func (s *Server) getTask(ctx context.Context, in *taskArgs) (*taskView, string, error) {
	t, err := s.task(ctx, in.ID)
	if err != nil {
		return nil, "", err
	}
	v, err := s.view(ctx, t, true)
	if err != nil {
		return nil, "", err
	}
	return v, fmt.Sprintf("read task %s (%s): %s", quote(t.Name), t.ID, t.Status), nil
}

// task reads a task the caller sees, by the id argument.
func (s *Server) task(ctx context.Context, id string) (*model.Task, error) {
	if err := need(id, "id", "the task's id, as enqueue_task or list_tasks gave it"); err != nil {
		return nil, err
	}
	return s.svc.Tasks.Task(ctx, strings.TrimSpace(id))
}

func quote(s string) string { return "'" + s + "'" }

func (s *Server) listTasks(ctx context.Context, in *listTasksArgs) (*taskList, string, error) {
	limit := in.Limit
	switch {
	case limit == 0:
		limit = 20
	case limit < 0 || limit > 100:
		return nil, "", badArg("argument 'limit' must be 1 to 100")
	}
	f := platform.TaskListFilter{ComputeResource: in.ComputeResource, Project: in.Project, Group: in.Group, Mine: in.Mine}
	for _, st := range in.Status {
		if !model.TaskStatus(st).Valid() {
			return nil, "", badArg("status %q is not known: use %s", st, strings.Join(statuses, ", "))
		}
		f.Statuses = append(f.Statuses, model.TaskStatus(st))
	}
	if c := in.Cursor; c != "" {
		if n, err := strconv.ParseInt(c, 10, 64); err != nil || n <= 0 {
			return nil, "", badArg("argument 'cursor' is not a cursor this tool gave; leave it out to start from the first page")
		}
	}
	tasks, err := s.svc.Tasks.Tasks(ctx, f, platform.Page{After: in.Cursor, Limit: limit + 1})
	if err != nil {
		return nil, "", err
	}
	out := &taskList{Tasks: []*taskView{}}
	if len(tasks) > limit {
		tasks = tasks[:limit]
		out.NextCursor = strconv.FormatInt(tasks[limit-1].QueueSeq, 10)
	}
	n, err := s.namer(ctx)
	if err != nil {
		return nil, "", err
	}
	for _, t := range tasks {
		v, err := n.task(ctx, t, false)
		if err != nil {
			return nil, "", err
		}
		out.Tasks = append(out.Tasks, v)
	}
	return out, fmt.Sprintf("listed %d tasks%s", len(out.Tasks), describeFilter(in)), nil
}

func describeFilter(in *listTasksArgs) string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+" "+v)
		}
	}
	add("status", strings.Join(in.Status, ","))
	add("compute resource", in.ComputeResource)
	add("project", in.Project)
	add("group", in.Group)
	if in.Mine {
		parts = append(parts, "mine")
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func (s *Server) taskLogs(ctx context.Context, in *logsArgs) (*logsView, string, error) {
	switch {
	case in.Tail < 0 || in.Tail > 5000:
		return nil, "", badArg("argument 'tail' must be 1 to 5000")
	case in.Limit < 0 || in.Limit > 5000:
		return nil, "", badArg("argument 'limit' must be 1 to 5000")
	case in.After < 0:
		return nil, "", badArg("argument 'after' must be a lastSeq a previous page gave (0 or more)")
	case in.Tail > 0 && (in.After > 0 || in.Limit > 0):
		return nil, "", badArg("give tail (the last lines), or after and limit (page on from a lastSeq), not both")
	}
	t, err := s.task(ctx, in.ID)
	if err != nil {
		return nil, "", err
	}
	tail := in.Tail
	if tail == 0 && in.After == 0 && in.Limit == 0 {
		tail = 100
	}
	page, err := s.svc.Tasks.TaskLogs(ctx, t, in.After, in.Limit, tail)
	if err != nil {
		return nil, "", err
	}
	out := &logsView{Task: taskRef{ID: t.ID, Name: t.Name}, Status: string(t.Status), Lines: []logLine{}, LastSeq: page.LastSeq, Truncated: page.Truncated}
	for _, l := range page.Lines {
		out.Lines = append(out.Lines, logLine{Seq: l.Seq, At: stamp(l.At), Attempt: l.Attempt, Stream: l.Stream, Line: l.Line})
	}
	return out, fmt.Sprintf("read %d log lines of task %s (%s)", len(out.Lines), quote(t.Name), t.ID), nil
}

func (s *Server) taskMetrics(ctx context.Context, in *metricsArgs) (*metricsView, string, error) {
	switch {
	case in.Limit < 0 || in.Limit > 10000:
		return nil, "", badArg("argument 'limit' must be 1 to 10000")
	case in.After < 0:
		return nil, "", badArg("argument 'after' must be a lastSeq a previous page gave (0 or more)")
	case in.Name == "" && (in.After > 0 || in.Limit > 0):
		return nil, "", badArg("after and limit page through one metric's series: give its name too")
	}
	t, err := s.task(ctx, in.ID)
	if err != nil {
		return nil, "", err
	}
	points, err := s.svc.Tasks.TaskMetrics(ctx, t, in.Name, in.After, in.Limit, in.Name == "")
	if err != nil {
		return nil, "", err
	}
	out := &metricsView{Task: taskRef{ID: t.ID, Name: t.Name}, Status: string(t.Status), Metrics: []metricPoint{}}
	for _, p := range points {
		out.Metrics = append(out.Metrics, metricPoint{Name: p.Name, Value: p.Value, Step: p.Step, At: stamp(p.At), Seq: p.Seq, Attempt: p.Attempt})
		if in.Name != "" {
			out.LastSeq = max(out.LastSeq, p.Seq)
		}
	}
	if in.Name != "" && out.LastSeq == 0 {
		out.LastSeq = in.After
	}
	return out, fmt.Sprintf("read %d metric points of task %s (%s)", len(out.Metrics), quote(t.Name), t.ID), nil
}

func (s *Server) abortTask(ctx context.Context, in *abortArgs) (*taskView, string, error) {
	if err := need(in.ID, "id", "the id of the task to abort"); err != nil {
		return nil, "", err
	}
	t, err := s.svc.Tasks.AbortTask(ctx, strings.TrimSpace(in.ID), in.Reason)
	if err != nil {
		return nil, "", err
	}
	v, err := s.view(ctx, t, false)
	return v, "", err
}

func (s *Server) cloneTask(ctx context.Context, in *cloneArgs) (*taskView, string, error) {
	if err := need(in.ID, "id", "the id of the task to clone"); err != nil {
		return nil, "", err
	}
	if in.Group != "" && in.ComputeResource == "" {
		return nil, "", badArg("argument 'group' says whose compute resource is meant: give computeResource too")
	}
	t, err := s.svc.Tasks.CloneTask(ctx, strings.TrimSpace(in.ID), platform.CloneInput{
		ParameterOverrides: in.ParameterOverrides, Name: in.Name, ComputeResource: in.ComputeResource,
		Group: in.Group, Project: in.Project, IdempotencyKey: in.IdempotencyKey,
	})
	if err != nil {
		return nil, "", err
	}
	v, err := s.view(ctx, t, true)
	return v, "", err
}

func (s *Server) compareTasks(ctx context.Context, in *compareArgs) (*comparison, string, error) {
	if len(in.IDs) < 2 || len(in.IDs) > 10 {
		return nil, "", badArg("argument 'ids' must list two to ten task ids")
	}
	c, err := s.svc.Tasks.CompareTasks(ctx, in.IDs)
	if err != nil {
		return nil, "", err
	}
	n, err := s.namer(ctx)
	if err != nil {
		return nil, "", err
	}
	out := &comparison{Parameters: []compareRow{}, Metrics: []compareMetric{}}
	var refs []string
	for _, t := range c.Tasks {
		owner, err := n.owner(ctx, t)
		if err != nil {
			return nil, "", err
		}
		ct := compareTask{ID: t.ID, Name: t.Name, Status: string(t.Status), ComputeResource: n.computeResource(t),
			Size: t.Size.String(), Owner: owner, CreatedAt: stamp(t.CreatedAt), Commit: t.Spec.Commit}
		if t.Run.StartedAt != nil && t.FinishedAt != nil {
			ct.RunSeconds = int64(t.FinishedAt.Sub(*t.Run.StartedAt).Seconds())
		}
		out.Tasks = append(out.Tasks, ct)
		refs = append(refs, fmt.Sprintf("%s (%s)", quote(t.Name), t.ID))
	}
	for _, p := range c.Parameters {
		out.Parameters = append(out.Parameters, compareRow{Name: p.Name, Values: p.Values, Differs: p.Differs})
	}
	for _, m := range c.Metrics {
		row := compareMetric{Name: m.Name, Direction: m.Direction, Differs: m.Differs}
		for i, f := range m.Final {
			if f == nil {
				row.Values, row.Steps, row.Best = append(row.Values, nil), append(row.Steps, nil), append(row.Best, nil)
				continue
			}
			v, st, b := f.Value, f.Step, m.Best[i].Value
			row.Values, row.Steps, row.Best = append(row.Values, &v), append(row.Steps, &st), append(row.Best, &b)
		}
		out.Metrics = append(out.Metrics, row)
	}
	out.CodeDiffers = c.Code.Differs
	return out, "compared tasks " + strings.Join(refs, ", "), nil
}

package kube

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/klique-ai/klique/agents/runner"
	"github.com/klique-ai/klique/internal/agentapi"
)

// Submit creates the task's Secret and its pod (or Job) and returns; the
// handle then follows the pods until they end.
func (r *Runner) Submit(ctx context.Context, job *runner.Job) (runner.Handle, error) {
	rend, err := r.Render(job)
	if err != nil {
		return nil, err
	}
	ns, cs := r.opts.Namespace, r.opts.Client
	sec := cs.CoreV1().Secrets(ns)
	if _, err := sec.Create(ctx, rend.Secret, metav1.CreateOptions{}); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create the task's Secret %s in namespace %s: %w", rend.Secret.Name, ns, err)
		}
		// Left by a worker that died before deleting it: this attempt's
		// values replace it.
		if _, err := sec.Update(ctx, rend.Secret, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("replace the task's Secret %s in namespace %s: %w", rend.Secret.Name, ns, err)
		}
	}
	h := &handle{r: r, job: job, rend: rend, nodes: max(job.Task.Nodes, 1), tail: runner.NewTail(r.opts.TailLines),
		done: make(chan struct{}), streamed: map[string]bool{}, container: TaskContainer}
	if rend.Pod != nil {
		h.name, h.kind, h.container = rend.Pod.Name, "pod", rend.Pod.Spec.Containers[0].Name
		_, err = cs.CoreV1().Pods(ns).Create(ctx, rend.Pod, metav1.CreateOptions{})
	} else {
		h.name, h.kind, h.container = rend.Job.Name, "Job", rend.Job.Spec.Template.Spec.Containers[0].Name
		_, err = cs.BatchV1().Jobs(ns).Create(ctx, rend.Job, metav1.CreateOptions{})
	}
	if err != nil {
		_ = sec.Delete(context.WithoutCancel(ctx), rend.Secret.Name, metav1.DeleteOptions{})
		return nil, fmt.Errorf("create %s %s in namespace %s: %w", h.kind, h.name, ns, err)
	}
	h.selector = LabelTask + "=" + rend.Secret.Labels[LabelTask] + "," + LabelAttempt + "=" + rend.Secret.Labels[LabelAttempt]
	h.status = runner.Status{Phase: runner.Pending, Reason: "waiting for the " + h.kind + "'s pods"}
	job.Log(agentapi.StreamWorker, fmt.Sprintf("created %s %s in namespace %s", h.kind, h.name, ns))
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h.cancel = cancel
	go h.loop(lctx)
	return h, nil
}

// handle follows one task's pods.
type handle struct {
	r         *Runner
	job       *runner.Job
	rend      *Rendered
	name      string
	kind      string
	container string
	selector  string
	nodes     int
	tail      *runner.Tail
	done      chan struct{}
	cancel    context.CancelFunc
	logs      sync.WaitGroup

	mu       sync.Mutex
	status   runner.Status
	diag     runner.Diagnostics
	stopped  bool
	started  bool
	seen     bool
	reason   string
	streamed map[string]bool
	// appPod is the pod as last seen, for an app instance's readiness.
	appPod *corev1.Pod
}

func (h *handle) Done() <-chan struct{} { return h.done }

func (h *handle) Poll(context.Context) (runner.Status, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.status, nil
}

func (h *handle) Diagnostics(context.Context) runner.Diagnostics {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.diag
	d.LastLines = h.tail.Lines()
	return d
}

// Stop deletes the pod (or the Job and its pods) with grace as the
// termination grace period: Kubernetes sends SIGTERM, waits, then SIGKILL.
// It returns once the pods are gone.
func (h *handle) Stop(ctx context.Context, grace time.Duration) error {
	h.mu.Lock()
	h.stopped = true
	h.mu.Unlock()
	select {
	case <-h.done:
		return nil
	default:
	}
	secs := int64((grace + time.Second - 1) / time.Second)
	if err := h.deleteObjects(ctx, &secs); err != nil {
		h.job.Log(agentapi.StreamWorker, "stop: "+err.Error())
	}
	select {
	case <-h.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// deleteObjects deletes the task's pod or Job (and the Job's pods).
func (h *handle) deleteObjects(ctx context.Context, grace *int64) error {
	ns, cs := h.r.opts.Namespace, h.r.opts.Client
	bg := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{GracePeriodSeconds: grace, PropagationPolicy: &bg}
	var errs []error
	if h.rend.Job != nil {
		if err := cs.BatchV1().Jobs(ns).Delete(ctx, h.name, opts); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete Job %s: %w", h.name, err))
		}
		// The Job's pods are deleted with it in the background; deleted
		// here too, so that they get the grace period at once.
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: h.selector})
		if err == nil {
			for _, p := range pods.Items {
				if err := cs.CoreV1().Pods(ns).Delete(ctx, p.Name, opts); err != nil && !apierrors.IsNotFound(err) {
					errs = append(errs, fmt.Errorf("delete pod %s: %w", p.Name, err))
				}
			}
		}
	} else if err := cs.CoreV1().Pods(ns).Delete(ctx, h.name, opts); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("delete pod %s: %w", h.name, err))
	}
	return errors.Join(errs...)
}

// loop follows the task's pods: a watch, a periodic list besides it, and
// the pending timeout.
func (h *handle) loop(ctx context.Context) {
	defer h.cancel()
	ns, cs := h.r.opts.Namespace, h.r.opts.Client
	pods := map[string]*corev1.Pod{}
	opts := metav1.ListOptions{LabelSelector: h.selector}
	relist := func() string {
		list, err := cs.CoreV1().Pods(ns).List(ctx, opts)
		if err != nil {
			h.job.Log(agentapi.StreamWorker, "list the task's pods: "+err.Error())
			return ""
		}
		clear(pods)
		for i := range list.Items {
			pods[list.Items[i].Name] = &list.Items[i]
		}
		return list.ResourceVersion
	}
	pending := time.NewTimer(h.r.opts.PendingTimeout)
	defer pending.Stop()
	resync := time.NewTicker(h.r.opts.Resync)
	defer resync.Stop()
	var events <-chan watch.Event
	var w watch.Interface
	defer func() {
		if w != nil {
			w.Stop()
		}
	}()
	rewatch := func() {
		if w != nil {
			w.Stop()
		}
		w, events = nil, nil
		o := opts
		o.ResourceVersion = relist()
		nw, err := cs.CoreV1().Pods(ns).Watch(ctx, o)
		if err == nil {
			w, events = nw, nw.ResultChan()
		}
	}
	rewatch()
	for {
		if h.evaluate(ctx, pods, false) {
			return
		}
		select {
		case ev, ok := <-events:
			if !ok {
				rewatch()
				continue
			}
			p, isPod := ev.Object.(*corev1.Pod)
			switch {
			case isPod && !h.mine(p):
				// Not this attempt's (a watch that does not filter).
			case !isPod:
				// An error event (the watch expired): start over.
				rewatch()
			case ev.Type == watch.Deleted:
				delete(pods, p.Name)
			default:
				pods[p.Name] = p
			}
		case <-resync.C:
			if events == nil {
				rewatch()
			} else {
				relist()
			}
		case <-pending.C:
			if h.evaluate(ctx, pods, true) {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// mine reports whether p is one of this attempt's pods.
func (h *handle) mine(p *corev1.Pod) bool {
	l := h.rend.Secret.Labels
	return p.Labels[LabelTask] == l[LabelTask] && p.Labels[LabelAttempt] == l[LabelAttempt]
}

// evaluate reads the pods' state, reports changes to the task's log, and
// ends the task when its pods ended, vanished, or (timedOut) never all
// started. It returns true once the task ended.
func (h *handle) evaluate(ctx context.Context, pods map[string]*corev1.Pod, timedOut bool) bool {
	h.mu.Lock()
	stopped := h.stopped
	if len(pods) > 0 {
		h.seen = true
	}
	if h.rend.Pod != nil {
		h.appPod = pods[h.name]
	}
	seen, started := h.seen, h.started
	h.mu.Unlock()

	names := sortedKeys(pods)
	var failed *corev1.Pod
	succeeded, running := 0, 0
	for _, n := range names {
		p := pods[n]
		switch p.Status.Phase {
		case corev1.PodFailed:
			if failed == nil {
				failed = p
			}
		case corev1.PodSucceeded:
			succeeded++
		case corev1.PodRunning:
			running++
		}
		if p.Status.Phase != corev1.PodPending {
			h.streamLogs(ctx, p, p.Status.Phase == corev1.PodRunning)
		}
	}
	switch {
	case failed != nil:
		code, sig, oom, msg := h.terminated(failed)
		h.end(ctx, pods, code, sig, oom, msg, failed.Name)
		return true
	case succeeded >= h.nodes:
		h.end(ctx, pods, 0, "", false, "", "")
		return true
	case stopped && (len(pods) == 0 || succeeded+countFailed(pods) == len(pods)):
		h.end(ctx, pods, -1, "", false, "stopped", "")
		return true
	case seen && len(pods) == 0 && !stopped:
		h.end(ctx, pods, -1, "", false, fmt.Sprintf("the %s's pods were deleted outside the worker", h.kind), "")
		return true
	case running+succeeded >= h.nodes:
		if !started {
			h.mu.Lock()
			h.started = true
			h.status = runner.Status{Phase: runner.Running}
			h.mu.Unlock()
			where := map[string]bool{}
			for _, p := range pods {
				if p.Spec.NodeName != "" {
					where[p.Spec.NodeName] = true
				}
			}
			h.job.Log(agentapi.StreamWorker, fmt.Sprintf("running on %s", orDefault(strings.Join(sortedKeys(where), ", "), "the cluster")))
		}
		return false
	}
	reason := h.pendingReason(pods)
	if timedOut && !started && !stopped {
		what := "the pod did not start"
		if h.rend.Job != nil {
			what = "the Job's pods did not all start"
		}
		h.end(ctx, pods, -1, "", false, fmt.Sprintf("%s within %s: %s", what, h.r.opts.PendingTimeout, reason), "")
		return true
	}
	h.mu.Lock()
	changed := reason != h.reason
	h.reason = reason
	if !started {
		h.status = runner.Status{Phase: runner.Pending, Reason: reason}
	}
	h.mu.Unlock()
	if changed && !started {
		h.job.Log(agentapi.StreamWorker, "pending: "+reason)
	}
	return false
}

func countFailed(pods map[string]*corev1.Pod) int {
	n := 0
	for _, p := range pods {
		if p.Status.Phase == corev1.PodFailed {
			n++
		}
	}
	return n
}

// pendingReason says why the pods are not all running: the scheduler's
// reason (Unschedulable and its message), else why the task's container
// waits (ImagePullBackOff, ContainerCreating).
func (h *handle) pendingReason(pods map[string]*corev1.Pod) string {
	if len(pods) < h.nodes && len(pods) == 0 {
		return fmt.Sprintf("waiting for the %s's pods", h.kind)
	}
	for _, n := range sortedKeys(pods) {
		p := pods[n]
		if p.Status.Phase != corev1.PodPending {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				return strings.TrimSpace(orDefault(c.Reason, "not scheduled") + ": " + c.Message)
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason != "" {
				return strings.TrimSuffix(w.Reason+": "+w.Message, ": ")
			}
		}
		if p.Spec.NodeName == "" {
			return "waiting for the scheduler"
		}
		return "starting on " + p.Spec.NodeName
	}
	if len(pods) < h.nodes {
		return fmt.Sprintf("%d of %d pods created", len(pods), h.nodes)
	}
	return "pending"
}

// terminated reads how a failed pod ended: its task container's exit code
// and reason, or the pod's own reason (evicted, deadline).
func (h *handle) terminated(p *corev1.Pod) (code int, sig string, oom bool, msg string) {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != h.container {
			continue
		}
		t := cs.State.Terminated
		if t == nil {
			t = cs.LastTerminationState.Terminated
		}
		if t == nil {
			break
		}
		code = int(t.ExitCode)
		oom = t.Reason == "OOMKilled"
		if t.Signal != 0 {
			sig = fmt.Sprintf("signal %d", t.Signal)
		} else if code == 137 {
			sig = "killed"
		}
		switch {
		case oom:
			msg = fmt.Sprintf("pod %s: the container ran out of memory (OOMKilled, exit code %d)", p.Name, code)
		case t.Reason != "" && t.Reason != "Error" && t.Reason != "Completed":
			msg = fmt.Sprintf("pod %s: %s", p.Name, strings.TrimSuffix(t.Reason+": "+t.Message, ": "))
		}
		return code, sig, oom, msg
	}
	reason := strings.TrimSuffix(p.Status.Reason+": "+p.Status.Message, ": ")
	return -1, "", false, fmt.Sprintf("pod %s failed: %s", p.Name, orDefault(reason, "no reason given"))
}

// streamLogs follows (or, for an ended pod, reads) a pod's output into the
// task's log, once per pod.
func (h *handle) streamLogs(ctx context.Context, p *corev1.Pod, follow bool) {
	h.mu.Lock()
	if h.streamed[p.Name] {
		h.mu.Unlock()
		return
	}
	h.streamed[p.Name] = true
	h.mu.Unlock()
	prefix := ""
	if h.nodes > 1 {
		prefix = "[" + orDefault(p.Annotations["batch.kubernetes.io/job-completion-index"], p.Name) + "] "
	}
	h.logs.Add(1)
	go func() {
		defer h.logs.Done()
		rc, err := h.r.opts.Client.CoreV1().Pods(h.r.opts.Namespace).GetLogs(p.Name,
			&corev1.PodLogOptions{Container: h.container, Follow: follow}).Stream(ctx)
		if err != nil {
			h.job.Log(agentapi.StreamWorker, fmt.Sprintf("read the output of pod %s: %v", p.Name, err))
			return
		}
		defer rc.Close()
		sc := bufio.NewScanner(rc)
		sc.Buffer(make([]byte, 64<<10), agentapi.MaxLogLineBytes)
		for sc.Scan() {
			line := prefix + sc.Text()
			h.tail.Add(line)
			h.job.Log(agentapi.StreamStdout, line)
		}
	}()
}

// end keeps what is known (the output, the events), deletes the task's
// objects and marks the task ended.
func (h *handle) end(ctx context.Context, pods map[string]*corev1.Pod, code int, sig string, oom bool, msg, failedPod string) {
	// The last lines: the output streams end with their containers.
	waited := make(chan struct{})
	go func() { h.logs.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		h.job.Log(agentapi.StreamWorker, "gave up waiting for the end of the pods' output")
	}
	if code != 0 {
		events := h.events(ctx, pods)
		for _, e := range events {
			h.job.Log(agentapi.StreamWorker, "event: "+e)
		}
		if failedPod != "" && len(events) > 0 && !oom {
			msg = strings.TrimPrefix(msg+"; last event: "+events[len(events)-1], "; ")
		}
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := h.deleteObjects(dctx, nil); err != nil {
		h.job.Log(agentapi.StreamWorker, err.Error())
	}
	if err := h.r.opts.Client.CoreV1().Secrets(h.r.opts.Namespace).Delete(dctx, h.rend.Secret.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		h.job.Log(agentapi.StreamWorker, fmt.Sprintf("delete Secret %s: %v", h.rend.Secret.Name, err))
	}
	h.mu.Lock()
	h.status = runner.Status{Phase: runner.Ended, ExitCode: code, Reason: msg}
	h.diag = runner.Diagnostics{ExitCode: code, Signal: sig, OOMKilled: oom, Message: msg}
	h.mu.Unlock()
	close(h.done)
}

// events are the Kubernetes events of the task's objects, oldest first, as
// "Reason: message" (scheduling failures, image pulls, evictions).
func (h *handle) events(ctx context.Context, pods map[string]*corev1.Pod) []string {
	names := []string{h.name}
	if h.rend.Job != nil {
		names = append(names, sortedKeys(pods)...)
	}
	type ev struct {
		at   time.Time
		text string
	}
	var all []ev
	for _, n := range names {
		sel := fields.OneTermEqualSelector("involvedObject.name", n).String()
		list, err := h.r.opts.Client.CoreV1().Events(h.r.opts.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			h.job.Log(agentapi.StreamWorker, fmt.Sprintf("read the events of %s: %v", n, err))
			continue
		}
		for _, e := range list.Items {
			if e.InvolvedObject.Name != n {
				continue
			}
			at := e.LastTimestamp.Time
			if at.IsZero() {
				at = e.EventTime.Time
			}
			all = append(all, ev{at, strings.TrimSuffix(e.Reason+": "+e.Message, ": ")})
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].at.Before(all[j].at) })
	if len(all) > 10 {
		all = all[len(all)-10:]
	}
	out := make([]string, len(all))
	for i, e := range all {
		out[i] = e.text
	}
	return out
}

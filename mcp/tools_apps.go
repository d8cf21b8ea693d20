package mcp

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
)

type listAppsArgs struct{}

type appView struct {
	Name        string `json:"name" jsonschema:"what to pass as app to launch_app"`
	Description string `json:"description,omitempty"`
	Kind        string `json:"kind" jsonschema:"serving (an OpenAI-compatible model server) or session (opened in a browser or terminal)"`
	Locked      bool   `json:"locked,omitempty" jsonschema:"a locked app cannot be launched"`
	Form        string `json:"form,omitempty" jsonschema:"the launch form: a JSON Schema of the values launch_app takes"`
}

type appsView struct {
	Apps []appView `json:"apps"`
}

type launchAppArgs struct {
	App                string         `json:"app" jsonschema:"the app to launch: list_apps lists them"`
	ComputeResource    string         `json:"computeResource" jsonschema:"a compute resource open to you, by name or id: list_compute_resources lists yours"`
	Group              string         `json:"group,omitempty" jsonschema:"whose compute resource, when its name is shared between your groups"`
	Project            string         `json:"project,omitempty" jsonschema:"the project the instance belongs to and is charged to"`
	Values             map[string]any `json:"values,omitempty" jsonschema:"the launch form's values (see the app's form in list_apps)"`
	Name               string         `json:"name,omitempty" jsonschema:"the instance's name (default <app>-<user>-<n>)"`
	Route              string         `json:"route,omitempty" jsonschema:"the static route the instance will serve"`
	ShareWithGroup     bool           `json:"shareWithGroup,omitempty" jsonschema:"let the members of the compute resource's group see and open it"`
	ShareWithUsers     []string       `json:"shareWithUsers,omitempty" jsonschema:"users who may see and open it"`
	IdleMinutes        *int           `json:"idleMinutes,omitempty" jsonschema:"stop it after this many idle minutes (at most the app's limit)"`
	MaxLifetimeMinutes *int           `json:"maxLifetimeMinutes,omitempty" jsonschema:"stop it this many minutes after its start (at most the app's limit)"`
}

type appInstanceArgs struct {
	ID string `json:"id" jsonschema:"the app instance's id"`
}

type appInstanceView struct {
	ID              string         `json:"id"`
	Name            string         `json:"name"`
	App             string         `json:"app"`
	State           string         `json:"state" jsonschema:"waiting, placed, running, ready (running and its health path answers), stopped or failed"`
	Reason          string         `json:"reason,omitempty" jsonschema:"why it is in its state"`
	URL             string         `json:"url" jsonschema:"where the router will serve it"`
	Address         string         `json:"address,omitempty" jsonschema:"host:port it answers at on its worker's site, once ready"`
	AddressRefused  string         `json:"addressRefused,omitempty" jsonschema:"why the router's address rule refused address: it is then reached through its worker's tunnel only"`
	ComputeResource string         `json:"computeResourceId"`
	Values          map[string]any `json:"values,omitempty"`
	Route           string         `json:"route,omitempty"`
	Runtime         *runtimeView   `json:"runtime,omitempty" jsonschema:"what it reports while it runs"`
	Idle            *idleView      `json:"idle,omitempty" jsonschema:"its idle limits and when they stop it unless it is used"`
}

type runtimeView struct {
	UptimeSeconds  int64      `json:"uptimeSeconds"`
	GPUUtilization *float64   `json:"gpuUtilization,omitempty" jsonschema:"its GPUs' mean utilisation in percent, as last reported"`
	CPUUtilization *float64   `json:"cpuUtilization,omitempty" jsonschema:"its CPU use in percent, as last reported"`
	LastActivity   *time.Time `json:"lastActivity,omitempty" jsonschema:"when it was last used (traffic, or GPU or CPU over the idle thresholds)"`
}

type idleView struct {
	IdleMinutes        int        `json:"idleMinutes" jsonschema:"idle minutes after which it is stopped (0: none)"`
	MaxLifetimeMinutes int        `json:"maxLifetimeMinutes" jsonschema:"minutes after its start at which it is stopped (0: none)"`
	IdleSince          *time.Time `json:"idleSince,omitempty"`
	StopsAt            *time.Time `json:"stopsAt,omitempty" jsonschema:"when its limits stop it unless it is used"`
	StopReason         string     `json:"stopReason,omitempty"`
	Warned             bool       `json:"warned" jsonschema:"whether it was warned that it will be stopped"`
}

func (s *Server) addAppTools() {
	addTool(s, toolDef{name: "list_apps", title: "List apps",
		description: "The app catalogue: model servers (vLLM, SGLang, NIM, llama.cpp) and sessions (JupyterLab, VS Code, Claude Code, SSH) you may launch on a compute resource, each with its launch form."}, s.listApps)
	addTool(s, toolDef{name: "get_app_instance", title: "Get an app instance",
		description: "An app instance you may see: its state, why, the URL the router will serve it at, its runtime (uptime, GPU and CPU use, last activity) and its idle limits (when they stop it unless it is used)."}, s.getAppInstance)
	addTool(s, toolDef{name: "launch_app", title: "Launch an app", writes: true, audited: true,
		description: "Launch an app instance on a compute resource: a task of type application, placed and charged like any task, holding its GPUs until stopped. " +
			"The values are checked against the app's launch form; the admin's lock, the launches switch and the running-apps quotas apply."}, s.launchApp)
	addTool(s, toolDef{name: "stop_app", title: "Stop an app instance", writes: true, audited: true, destructive: true,
		description: "Stop an app instance you own (or lead the group of): its GPUs are released."}, s.stopApp)
}

func (s *Server) listApps(ctx context.Context, _ *listAppsArgs) (*appsView, string, error) {
	all, err := s.svc.Apps.Apps(ctx)
	if err != nil {
		return nil, "", err
	}
	out := &appsView{Apps: []appView{}}
	for _, a := range all {
		out.Apps = append(out.Apps, appView{Name: a.Name, Description: a.Description, Kind: string(a.Kind), Locked: a.Locked, Form: a.Form})
	}
	return out, fmt.Sprintf("listed %d apps", len(out.Apps)), nil
}

func (s *Server) launchApp(ctx context.Context, in *launchAppArgs) (*appInstanceView, string, error) {
	if strings.TrimSpace(in.App) == "" {
		return nil, "", &argError{"argument 'app' is missing: name an app from list_apps"}
	}
	if strings.TrimSpace(in.ComputeResource) == "" {
		return nil, "", &argError{"argument 'computeResource' is missing: name one from list_compute_resources"}
	}
	inst, err := s.svc.Apps.LaunchApp(ctx, platform.LaunchInput{App: in.App, ComputeResource: in.ComputeResource, Group: in.Group, Project: in.Project,
		Values: in.Values, Name: in.Name, Route: in.Route, ShareWithGroup: in.ShareWithGroup, ShareWithUsers: in.ShareWithUsers,
		IdleMinutes: in.IdleMinutes, MaxLifetimeMinutes: in.MaxLifetimeMinutes})
	if err != nil {
		return nil, "", err
	}
	return instanceView(inst), "", nil
}

func (s *Server) stopApp(ctx context.Context, in *appInstanceArgs) (*appInstanceView, string, error) {
	inst, err := s.svc.Apps.StopApp(ctx, strings.TrimSpace(in.ID))
	if err != nil {
		return nil, "", err
	}
	return instanceView(inst), "", nil
}

func (s *Server) getAppInstance(ctx context.Context, in *appInstanceArgs) (*appInstanceView, string, error) {
	inst, err := s.svc.Apps.AppInstance(ctx, strings.TrimSpace(in.ID))
	if err != nil {
		return nil, "", err
	}
	return instanceView(inst), "read app instance " + inst.Task.ID, nil
}

func instanceView(in *model.AppInstance) *appInstanceView {
	v := &appInstanceView{ID: in.Task.ID, Name: in.Task.Name, State: in.State, Reason: in.Task.Reason, URL: in.URL, Address: in.Address, AddressRefused: in.AddressRefused,
		ComputeResource: in.Task.ComputeResourceID}
	if l := in.Task.Spec.App; l != nil {
		v.App, v.Values, v.Route = l.App, l.Values, l.Route
	}
	if r := in.Runtime; r != nil {
		v.Runtime = &runtimeView{UptimeSeconds: int64(r.Uptime / time.Second), GPUUtilization: r.GPUUtilization, CPUUtilization: r.CPUUtilization, LastActivity: r.LastActivity}
	}
	if i := in.Idle; i != nil {
		v.Idle = &idleView{IdleMinutes: i.IdleMinutes, MaxLifetimeMinutes: i.MaxLifetimeMinutes, IdleSince: i.IdleSince, StopsAt: i.StopsAt,
			StopReason: i.StopReason, Warned: i.WarnedAt != nil}
	}
	return v
}

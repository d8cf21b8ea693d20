package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"

	"github.com/klique-ai/klique/internal/agentapi"
)

// An app instance's pod is the task's pod with three differences: the
// app's pod fragment merged in, a readiness probe on the app's health
// path, and its readiness read from the pod (AppReady) rather than probed
// by the worker, which may not reach the pod network at all.

// AppPortName names the app's port on its container.
const AppPortName = "app"

// mergePodFragment merges an app's pod template fragment (a pod spec in
// YAML: containers, volumes, nodeSelector, …) into spec the way kubectl
// apply would (a strategic merge patch): its first container is the
// task's container whatever its name, so its image, args, env and mounts
// merge into it; its other containers are added beside it. The worker's
// own settings (GPUs, the task's variables) are applied after, so a
// fragment cannot change them.
func mergePodFragment(spec corev1.PodSpec, fragment string) (corev1.PodSpec, error) {
	var check corev1.PodSpec
	if err := yaml.UnmarshalStrict([]byte(fragment), &check); err != nil {
		return spec, fmt.Errorf("the app's pod template fragment: %w (write it as a pod spec: containers, volumes, nodeSelector, …)", err)
	}
	raw, err := yaml.YAMLToJSON([]byte(fragment))
	if err != nil {
		return spec, fmt.Errorf("the app's pod template fragment: %w", err)
	}
	var patch map[string]any
	if err := json.Unmarshal(raw, &patch); err != nil || patch == nil {
		return spec, fmt.Errorf("the app's pod template fragment is not a pod spec (a YAML mapping): %s", strings.TrimSpace(fragment))
	}
	if cs, ok := patch["containers"].([]any); ok && len(cs) > 0 {
		if c0, ok := cs[0].(map[string]any); ok {
			c0["name"] = spec.Containers[0].Name
		}
	}
	patchJSON, err := json.Marshal(patch)
	if err != nil {
		return spec, err
	}
	orig, err := json.Marshal(spec)
	if err != nil {
		return spec, err
	}
	merged, err := strategicpatch.StrategicMergePatch(orig, patchJSON, corev1.PodSpec{})
	if err != nil {
		return spec, fmt.Errorf("merge the app's pod template fragment into the worker's pod template: %w", err)
	}
	var out corev1.PodSpec
	if err := json.Unmarshal(merged, &out); err != nil {
		return spec, fmt.Errorf("merge the app's pod template fragment: %w", err)
	}
	return out, nil
}

// appProbe declares the app's port on its container and, unless the
// fragment gave one, a readiness probe on its health path: the kubelet
// probes it, and the pod is Ready while it answers.
func appProbe(c *corev1.Container, app *agentapi.AppAssignment) error {
	if app.Port <= 0 || app.Port > 65535 {
		return fmt.Errorf("the app's port %d is not a TCP port: give the catalogue entry the port it listens on", app.Port)
	}
	declared := false
	for _, p := range c.Ports {
		if p.ContainerPort == int32(app.Port) {
			declared = true
		}
	}
	if !declared {
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: AppPortName, ContainerPort: int32(app.Port), Protocol: corev1.ProtocolTCP})
	}
	if c.ReadinessProbe == nil {
		path := app.HealthPath
		if path == "" {
			path = "/"
		}
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		c.ReadinessProbe = &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(int32(app.Port))}},
			PeriodSeconds:    2,
			FailureThreshold: 3,
			TimeoutSeconds:   2,
		}
	}
	return nil
}

// AppReady reads an app instance's readiness from its pod, as the last
// watch or list saw it: ready while the pod is Running with its Ready
// condition true (its readiness probe answers), at the pod's IP and the
// app's port.
func (h *handle) AppReady(context.Context) (string, bool) {
	app := h.job.Task.App
	if app == nil {
		return "", false
	}
	h.mu.Lock()
	p := h.appPod
	h.mu.Unlock()
	if p == nil || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
		return "", false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return net.JoinHostPort(p.Status.PodIP, strconv.Itoa(app.Port)), true
		}
	}
	return "", false
}

package realnode

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Finished reports a pod that has run to completion (Succeeded or Failed).
func Finished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// Running reports a Running pod with an IP.
func Running(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != ""
}

// WaitPod polls pod ns/name every 50 ms until done holds, and returns it.
// Errors: timeout (with the last status seen) or ctx done.
func WaitPod(ctx context.Context, kube kubernetes.Interface, ns, name string, timeout time.Duration, done func(*corev1.Pod) bool) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last *corev1.Pod
	for {
		p, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			if done(p) {
				return p, nil
			}
			last = p
		}
		select {
		case <-ctx.Done():
			status := "never seen"
			if last != nil {
				status = fmt.Sprintf("phase %s, conditions %v", last.Status.Phase, last.Status.Conditions)
			}
			return last, fmt.Errorf("pod %s/%s: %w (%s)", ns, name, ctx.Err(), status)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TerminationMessage is the first container's termination message (what
// netprobe observed), or "".
func TerminationMessage(p *corev1.Pod) string {
	if cs := p.Status.ContainerStatuses; len(cs) > 0 && cs[0].State.Terminated != nil {
		return cs[0].State.Terminated.Message
	}
	return ""
}

// Ready reports a pod whose Ready condition is True.
func Ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

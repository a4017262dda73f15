package controlplane

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// KubeletStandIn replaces the one thing a kubelet does that the
// agent-sandbox controllers wait for: it sets the status of every pod to
// Running and Ready (all conditions True, each container running), with a
// pod IP from 10.244.0.0/16. It does not run containers, mount volumes,
// write tokens into pods or finalize deletions. This is the only fake in
// the harness.
type KubeletStandIn struct {
	kube kubernetes.Interface
	ip   atomic.Uint32
}

// NewKubeletStandIn returns a stand-in that uses kube.
func NewKubeletStandIn(kube kubernetes.Interface) *KubeletStandIn {
	return &KubeletStandIn{kube: kube}
}

// Run watches pods in every namespace until ctx is done.
func (k *KubeletStandIn) Run(ctx context.Context) {
	for ctx.Err() == nil {
		w, err := k.kube.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{})
		if err != nil {
			time.Sleep(500 * time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			if pod, ok := ev.Object.(*corev1.Pod); ok && pod.DeletionTimestamp == nil && !podReady(pod) {
				_ = k.markReady(ctx, pod.Namespace, pod.Name)
			}
		}
		w.Stop()
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (k *KubeletStandIn) markReady(ctx context.Context, ns, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := k.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pod.DeletionTimestamp != nil || podReady(pod) {
			return nil
		}
		now := metav1.Now()
		n := k.ip.Add(1)
		pod.Status.Phase = corev1.PodRunning
		pod.Status.PodIP = fmt.Sprintf("10.244.%d.%d", (n/250)%250, n%250+1)
		pod.Status.PodIPs = []corev1.PodIP{{IP: pod.Status.PodIP}}
		pod.Status.HostIP = "127.0.0.1"
		pod.Status.StartTime = &now
		pod.Status.Conditions = nil
		for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
			pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
		}
		pod.Status.ContainerStatuses = nil
		started := true
		for _, c := range pod.Spec.Containers {
			pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, Ready: true, Started: &started,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			})
		}
		_, err = k.kube.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	})
}

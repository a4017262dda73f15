package onnode

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/agentcustody/custody/test/e2e/fixture"
)

// agentLog polls the sandbox's agent container log until it contains
// want, and returns it.
func agentLog(t *testing.T, ctx context.Context, pod *corev1.Pod, want string) string {
	t.Helper()
	var logs string
	err := fixture.Poll(ctx, 30*time.Second, func() (bool, error) {
		b, err := cluster.CP.Kube.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "agent"}).DoRaw(ctx)
		logs = string(b)
		return err == nil && strings.Contains(logs, want), nil
	})
	if err != nil {
		t.Fatalf("agent log of %s never showed %q: %v\n%s", pod.Name, want, err, logs)
	}
	return logs
}

// TestSandboxAgentExchangesItsProjectedToken: the template's own process
// in the warm-pool pod, reading the token the kubelet projects at
// CUSTODY_TOKEN_FILE, is refused (warm_pool) until a claim adopts the
// pod, then gets a key for the claim.
func TestSandboxAgentExchangesItsProjectedToken(t *testing.T) {
	ctx := need(t)
	warm, err := env.WarmPoolPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	agentLog(t, ctx, warm, "exchange 401 warm_pool")
	if err := env.CreateClaim(ctx, "self"); err != nil {
		t.Fatal(err)
	}
	pod, err := env.ClaimPod(ctx, "self")
	if err != nil {
		t.Fatal(err)
	}
	if pod.UID != warm.UID {
		t.Fatalf("claim self got pod %s, not the warm-pool pod %s", pod.Name, warm.Name)
	}
	logs := agentLog(t, ctx, pod, "exchange 200 agents/self")
	if strings.Index(logs, "exchange 401 warm_pool") > strings.Index(logs, "exchange 200 agents/self") {
		t.Errorf("the refusal came after the key:\n%s", logs)
	}
}

// TestDeletedClaimStopsPodAndResumes: the claim is deleted, its pod's
// containers are really stopped (containerd has no task for them), a copy
// of the pod's token is refused, and the re-created claim's new pod
// resumes the saved working state under a higher lease epoch.
func TestDeletedClaimStopsPodAndResumes(t *testing.T) {
	ctx := need(t)
	if err := env.CreateClaim(ctx, "resume"); err != nil {
		t.Fatal(err)
	}
	podA, err := env.ClaimPod(ctx, "resume")
	if err != nil {
		t.Fatal(err)
	}
	tokA, err := env.PodToken(ctx, podA, fixture.Audience)
	if err != nil {
		t.Fatal(err)
	}
	kA := key(t, ctx, tokA)
	url := dep.Custody.URL + "/v1/memory/" + kA.Tenant + "/" + kA.Agent + "/state/work"
	r, err := fixture.Do(ctx, "POST", url+"/lease", kA.Key, nil)
	var la struct{ Epoch int64 }
	if err != nil || r.Status != http.StatusOK || r.JSON(&la) != nil {
		t.Fatalf("lease = %v %v", r, err)
	}
	saved := `{"step":7}`
	if r, err := fixture.Do(ctx, "PUT", url, kA.Key, []byte(saved), "Lease-Epoch", fmt.Sprint(la.Epoch), "If-Match", "0"); err != nil || r.Status != http.StatusOK {
		t.Fatalf("save = %v %v", r, err)
	}
	containers := containerIDs(podA)
	if len(containers) == 0 {
		t.Fatalf("pod %s reports no running containers", podA.Name)
	}
	if err := env.DeleteClaim(ctx, "resume"); err != nil {
		t.Fatal(err)
	}
	if err := env.WaitPodGone(ctx, podA); err != nil {
		t.Fatal(err)
	}
	tasks, err := cluster.Host.Ctr(ctx, "tasks", "ls")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range containers {
		if strings.Contains(string(tasks), id) {
			t.Errorf("container %s of the deleted pod still has a task:\n%s", id, tasks)
		}
	}
	if r, err := fixture.Exchange(ctx, dep.Custody.URL, tokA); err != nil || r.Status != http.StatusUnauthorized {
		t.Errorf("old pod's token after the delete = %v %v, want 401", r, err)
	}
	if err := env.CreateClaim(ctx, "resume"); err != nil {
		t.Fatal(err)
	}
	podB, err := env.ClaimPod(ctx, "resume")
	if err != nil {
		t.Fatal(err)
	}
	tokB, err := env.PodToken(ctx, podB, fixture.Audience)
	if err != nil {
		t.Fatal(err)
	}
	kB := key(t, ctx, tokB)
	if kB.Agent != kA.Agent || podB.UID == podA.UID {
		t.Fatalf("new pod %s got agent %s, want %s from a new pod", podB.Name, kB.Agent, kA.Agent)
	}
	r, err = fixture.Do(ctx, "POST", url+"/lease", kB.Key, nil)
	var lb struct {
		Epoch int64
		State map[string]any
	}
	if err != nil || r.Status != http.StatusOK || r.JSON(&lb) != nil || lb.Epoch <= la.Epoch || fmt.Sprint(lb.State["step"]) != "7" {
		t.Fatalf("resume = %v %v, want 200, epoch > %d, state %s", r, err, la.Epoch, saved)
	}
}

type keyResp struct{ Key, Tenant, Agent string }

func key(t *testing.T, ctx context.Context, tok string) keyResp {
	t.Helper()
	r, err := fixture.Exchange(ctx, dep.Custody.URL, tok)
	var k keyResp
	if err != nil || r.Status != http.StatusOK || r.JSON(&k) != nil || k.Key == "" {
		t.Fatalf("exchange = %v %v, want 200 with a key", r, err)
	}
	return k
}

// containerIDs are the pod's running containers' containerd IDs.
func containerIDs(p *corev1.Pod) []string {
	var ids []string
	for _, cs := range p.Status.ContainerStatuses {
		if _, id, ok := strings.Cut(cs.ContainerID, "://"); ok && cs.State.Running != nil {
			ids = append(ids, id)
		}
	}
	return ids
}

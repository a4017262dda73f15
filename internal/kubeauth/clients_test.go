package kubeauth

import (
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// TestClientsShareOneConnection: the Kube and Dynamic clients from
// Clients, reading concurrently, use one HTTP/2 connection to the API
// server (a TLS stand-in answering pod and Sandbox GETs).
func TestClientsShareOneConnection(t *testing.T) {
	var conns atomic.Int32
	var protos sync.Map
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		protos.Store(r.Proto, true)
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(r.URL.Path, "/sandboxes/") {
			_, _ = w.Write([]byte(`{"apiVersion":"agents.x-k8s.io/v1beta1","kind":"Sandbox","metadata":{"name":"sb","namespace":"agents"}}`))
			return
		}
		_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"agents"}}`))
	}))
	srv.EnableHTTP2 = true
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	kc, dc, err := Clients(&rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	getPod := func() error { _, err := kc.CoreV1().Pods("agents").Get(ctx, "p", metav1.GetOptions{}); return err }
	getSandbox := func() error {
		_, err := dc.Resource(SandboxGVR).Namespace("agents").Get(ctx, "sb", metav1.GetOptions{})
		return err
	}
	if err := getPod(); err != nil { // the connection
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := 0; i < 10; i++ {
		wg.Add(2)
		go func() { defer wg.Done(); errs <- getPod() }()
		go func() { defer wg.Done(); errs <- getSandbox() }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("connections to the API server = %d, want 1", n)
	}
	if _, ok := protos.Load("HTTP/2.0"); !ok {
		t.Errorf("requests were not HTTP/2")
	}
	if h1, ok := protos.Load("HTTP/1.1"); ok && h1.(bool) {
		t.Errorf("some requests were HTTP/1.1")
	}
}

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// decider is one client's own keep-alive HTTP/1.1 connection, writing
// requests and reading replies directly (http.ReadResponse), so that the
// load generator, which shares the machine's cores with the server,
// spends as little CPU per request as it can.
type decider struct {
	conn net.Conn
	r    *bufio.Reader
	head string // request line and headers up to Content-Length's value
	buf  bytes.Buffer
	body bytes.Buffer
}

// newDecider connects to api (http://HOST:PORT) for POSTs to path with
// bearer token key.
func newDecider(api, path, key string) (*decider, error) {
	conn, err := net.Dial("tcp", strings.TrimPrefix(api, "http://"))
	if err != nil {
		return nil, err
	}
	return &decider{
		conn: conn,
		r:    bufio.NewReaderSize(conn, 16<<10),
		head: "POST " + path + " HTTP/1.1\r\nHost: " + strings.TrimPrefix(api, "http://") +
			"\r\nAuthorization: Bearer " + key + "\r\nContent-Type: application/json\r\nContent-Length: ",
	}, nil
}

// decide posts body and checks for 200 with an "effect".
func (d *decider) decide(body []byte) error {
	d.buf.Reset()
	d.buf.WriteString(d.head)
	d.buf.WriteString(strconv.Itoa(len(body)))
	d.buf.WriteString("\r\n\r\n")
	d.buf.Write(body)
	if _, err := d.conn.Write(d.buf.Bytes()); err != nil {
		return err
	}
	resp, err := http.ReadResponse(d.r, nil)
	if err != nil {
		return err
	}
	d.body.Reset()
	_, err = io.Copy(&d.body, resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("decide: %d %s", resp.StatusCode, tail(d.body.Bytes(), 300))
	}
	var out struct {
		Effect string `json:"effect"`
	}
	if err := json.Unmarshal(d.body.Bytes(), &out); err != nil || out.Effect == "" {
		return fmt.Errorf("decide: no effect in the reply: %s", tail(d.body.Bytes(), 300))
	}
	return nil
}

func (d *decider) close() {
	if d != nil {
		d.conn.Close()
	}
}

package agentapi

import (
	"fmt"
	"io"
)

// The tunnel: each worker keeps one outbound WebSocket to the control
// plane at PathTunnel, multiplexed with yamux, through which the control
// plane reaches the worker's app instances when it has no other path to
// the worker's site. The worker dials out (as for every other call); the
// control plane opens a stream per connection it needs, the worker
// accepts it.
//
// Each stream starts with one line from the control plane, a
// TunnelRequest as JSON followed by "\n", naming the app instance (task
// and attempt). The worker answers with one line: TunnelOK, or
// TunnelRefused followed by a message that says why. After "ok\n" the
// stream carries the instance's bytes both ways. A worker answers only for
// the app instances it runs now, and dials only their own ports: the
// control plane can never make a worker open a connection to any other
// host or port.

// PathTunnel is the tunnel's WebSocket (GET with an Upgrade). A worker
// credential names its worker with ?workerId=; a task credential (the
// task's own process inside an HPC job) needs no worker id and is limited
// to its one task and attempt.
const PathTunnel = Prefix + "/tunnel"

// TunnelSubprotocol is the WebSocket subprotocol of the tunnel, so that a
// future change of the framing is told apart.
const TunnelSubprotocol = "klique-tunnel.v1"

// TunnelRequest is the first line of a stream.
type TunnelRequest struct {
	TaskID  string `json:"taskId"`
	Attempt int    `json:"attempt"`
}

// The worker's answer to a TunnelRequest, one line each.
const (
	TunnelOK      = "ok"
	TunnelRefused = "refused: "
)

// MaxTunnelLine bounds the request and answer lines of a stream.
const MaxTunnelLine = 4 << 10

// ReadTunnelLine reads one line of a stream (without its "\n"), of at most
// MaxTunnelLine bytes, a byte at a time: nothing after the line is taken
// from r, since what follows belongs to the app instance.
func ReadTunnelLine(r io.Reader) (string, error) {
	buf := make([]byte, 0, 64)
	var b [1]byte
	for len(buf) <= MaxTunnelLine {
		n, err := r.Read(b[:])
		if n == 1 {
			if b[0] == '\n' {
				return string(buf), nil
			}
			buf = append(buf, b[0])
			continue
		}
		if err == io.EOF {
			return "", io.ErrUnexpectedEOF
		}
		if err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("the line is longer than %d bytes", MaxTunnelLine)
}

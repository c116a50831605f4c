package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// server is one run of the mayfly binary.
type server struct {
	cmd    *exec.Cmd
	addr   string
	pid    int
	exited chan struct{} // closed when the process has exited
	state  *os.ProcessState
	killed bool // we sent SIGKILL: the exit is ours, not a crash

	mu   sync.Mutex
	tail []string // last lines of stderr, for a crash report
}

// start launches the binary on dbpath and waits until it listens.
func start(binary, dbpath string, commitMS int) (*server, error) {
	s := &server{exited: make(chan struct{})}
	s.cmd = exec.Command(binary, "--port", "0", "--log-format", "json", "--log-level", "info",
		"--dbpath", dbpath, "--journalCommitInterval", strconv.Itoa(commitMS))
	errPipe, err := s.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	s.pid = s.cmd.Process.Pid
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(errPipe)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			var entry map[string]any
			if json.Unmarshal([]byte(line), &entry) == nil && entry["id"] == 23016.0 { // mongod's "Waiting for connections"
				attr, _ := entry["attr"].(map[string]any)
				if a, ok := attr["address"].(string); ok {
					select {
					case found <- a:
					default:
					}
				}
			}
			if entry == nil || entry["s"] != "I" && entry["s"] != "D1" {
				s.mu.Lock()
				s.tail = append(s.tail, line)
				if len(s.tail) > 40 {
					s.tail = s.tail[len(s.tail)-40:]
				}
				s.mu.Unlock()
			}
		}
		io.Copy(io.Discard, errPipe)
	}()
	go func() {
		s.cmd.Wait()
		s.state = s.cmd.ProcessState
		close(s.exited)
	}()
	select {
	case a := <-found:
		s.addr = a
		return s, nil
	case <-s.exited:
		return nil, fmt.Errorf("mayfly exited before listening (%v): %s", s.state, strings.Join(s.lastLines(), "\n"))
	case <-time.After(60 * time.Second):
		s.cmd.Process.Kill()
		return nil, fmt.Errorf("mayfly did not listen within 60 s")
	}
}

func (s *server) lastLines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.tail...)
}

// alive reports whether the process is still running.
func (s *server) alive() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// kill9 sends SIGKILL and waits for the process to be gone.
func (s *server) kill9() {
	s.killed = true
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
}

// stop ends the server cleanly (SIGTERM), or kills it after 15 s.
func (s *server) stop() {
	if !s.alive() {
		return
	}
	s.killed = true
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(15 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
}

// memory reads VmRSS and VmHWM (bytes) from /proc/<pid>/status.
func (s *server) memory() (rss, hwm int64) {
	m := s.status()
	return m["VmRSS:"], m["VmHWM:"]
}

// status reads the Vm* figures (bytes) of /proc/<pid>/status.
func (s *server) status() map[string]int64 {
	out := map[string]int64{}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.pid))
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[2] == "kB" && strings.HasPrefix(f[0], "Vm") {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			out[f[0]] = kb << 10
		}
	}
	return out
}

package probe

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/batchtune/batchtune/tfserving"
)

// The lean gRPC path.
//
// A load generator sends one unary call, with the same few request bodies,
// over and over; a general gRPC client does per call what only needs doing
// once (encode headers, allocate a stream object, marshal, run the retry
// and stats machinery) and routes every call through two extra goroutines.
// h2Sender speaks the gRPC wire protocol (gRPC over HTTP/2, unary calls
// only) directly on golang.org/x/net/http2's framer and hpack:
//
//   - the request HEADERS block is hpack-encoded once, with every field a
//     literal that is never indexed, so it does not touch the dynamic table
//     and the same bytes are valid for every request on every connection;
//   - each request body (gRPC's 5-byte prefix + the marshalled message) is
//     built once;
//   - a worker appends its HEADERS and DATA frames to its connection's
//     write buffer under the connection lock and wakes the connection's
//     writer goroutine only when the buffer was empty, so under load one
//     write system call carries many requests;
//   - the connection's reader goroutine parses frames and hands the status
//     of a finished stream to the waiting worker over a channel that the
//     worker owns for the whole run: one goroutine hand-off per request and
//     no allocation on the request side.
//
// It honours HTTP/2 flow control in both directions (large requests wait
// for WINDOW_UPDATE; it grants itself 1 GiB windows for answers),
// SETTINGS_MAX_CONCURRENT_STREAMS, SETTINGS_MAX_FRAME_SIZE, PING, GOAWAY
// (no new streams; unprocessed ones fail UNAVAILABLE; a fresh connection is
// dialled) and RST_STREAM. Answers are not decoded: a call's outcome is its
// grpc-status trailer (or the HTTP status when there is none). TLS is not
// supported. The typed control calls (status, metadata, the check request)
// go through grpc-go.

const (
	h2RecvWindow   = 1 << 30 // our stream and connection receive windows
	h2MaxReadFrame = 1 << 20 // SETTINGS_MAX_FRAME_SIZE we accept
	h2DialTimeout  = 5 * time.Second
	h2Redial       = 50 * time.Millisecond // least time between failed dials
	h2MaxStreamID  = 1<<31 - 1
)

// h2Sender implements sender over Connections lean HTTP/2 connections.
type h2Sender struct {
	addr   string
	hdr    []byte   // the encoded request header block
	bodies [][]byte // per request: gRPC prefix + message
	slots  []*h2slot

	callsMu sync.Mutex
	calls   atomic.Pointer[[]*h2call] // per worker, grown on demand
}

var _ sender = (*h2Sender)(nil)

// h2slot holds the current connection of one of the Connections.
type h2slot struct {
	cur      atomic.Pointer[h2conn]
	mu       sync.Mutex // serialises dials
	lastErr  error
	lastFail time.Time
}

// h2call is a worker's reusable call state; it is in at most one stream at
// a time.
type h2call struct {
	done       chan codes.Code // capacity 1; the reader delivers the outcome
	win        int64           // stream send window; guarded by the conn's mu
	httpStatus int             // :status of the answer; guarded by the conn's mu
}

func newH2Sender(addr string, n int, reqs []*tfserving.PredictRequest) (*h2Sender, error) {
	s := &h2Sender{addr: addr}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":path", predictMethod}, {":authority", addr},
		{"content-type", "application/grpc"}, {"te", "trailers"}, {"user-agent", "batchtune-probe"},
	} {
		if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1], Sensitive: true}); err != nil {
			return nil, err
		}
	}
	s.hdr = hb.Bytes()
	for _, r := range reqs {
		m, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("%w: encode request: %w", ErrBadPayload, err)
		}
		b := make([]byte, 5, 5+len(m))
		binary.BigEndian.PutUint32(b[1:], uint32(len(m)))
		s.bodies = append(s.bodies, append(b, m...))
	}
	for i := 0; i < n; i++ {
		s.slots = append(s.slots, &h2slot{})
	}
	empty := []*h2call{}
	s.calls.Store(&empty)
	return s, nil
}

func (s *h2Sender) call(worker int) *h2call {
	if cs := *s.calls.Load(); worker < len(cs) {
		return cs[worker]
	}
	s.callsMu.Lock()
	defer s.callsMu.Unlock()
	cs := *s.calls.Load()
	if worker < len(cs) {
		return cs[worker]
	}
	grown := append([]*h2call(nil), cs...)
	for len(grown) <= worker {
		grown = append(grown, &h2call{done: make(chan codes.Code, 1)})
	}
	s.calls.Store(&grown)
	return grown[worker]
}

// conn returns slot i's usable connection, dialling one when there is
// none. After a failed dial, callers are turned away for h2Redial.
func (s *h2Sender) conn(ctx context.Context, i int) (*h2conn, error) {
	sl := s.slots[i]
	if c := sl.cur.Load(); c != nil && c.usable() {
		return c, nil
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if c := sl.cur.Load(); c != nil && c.usable() {
		return c, nil
	}
	if sl.lastErr != nil && time.Since(sl.lastFail) < h2Redial {
		return nil, sl.lastErr
	}
	c, err := dialH2(ctx, s.addr)
	if err != nil {
		sl.lastErr, sl.lastFail = err, time.Now()
		return nil, err
	}
	sl.lastErr = nil
	if old := sl.cur.Swap(c); old != nil {
		old.retire()
	}
	return c, nil
}

func (s *h2Sender) send(ctx context.Context, worker, req int) codes.Code {
	call := s.call(worker)
	for attempt := 0; ; attempt++ {
		c, err := s.conn(ctx, worker%len(s.slots))
		if err != nil {
			// Nothing to talk to: do not spin, wait out the redial delay.
			t := time.NewTimer(h2Redial)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
			return codes.Unavailable
		}
		code, started := c.do(ctx, call, s.hdr, s.bodies[req])
		// A stream refused by the server, or a connection that went away
		// before the stream began (GOAWAY, stream ids used up), is tried
		// once more: either way the server never processed the request.
		if code == codeRefused {
			if attempt == 0 {
				continue
			}
			return codes.Unavailable
		}
		if started || attempt > 0 {
			return code
		}
	}
}

func (s *h2Sender) close() error {
	for _, sl := range s.slots {
		if c := sl.cur.Load(); c != nil {
			c.fail(errors.New("probe: sender closed"))
		}
	}
	return nil
}

// h2conn is one HTTP/2 connection.
type h2conn struct {
	nc       net.Conn
	wake     chan struct{} // capacity 1: the writer has work
	done     chan struct{} // closed once the connection failed
	settled  chan struct{} // closed when the server's first SETTINGS arrived
	settleMu sync.Once

	closing atomic.Bool // no new streams (failed, GOAWAY, ids used up)

	mu       sync.Mutex
	cond     *sync.Cond // stream slots and send windows
	waiters  int        // goroutines in cond.Wait
	wbuf     []byte     // frames waiting for the writer
	nextID   uint32
	streams  map[uint32]*h2call
	maxConc  uint32 // peer's SETTINGS_MAX_CONCURRENT_STREAMS
	sendWin  int64  // connection send window
	initWin  int64  // peer's SETTINGS_INITIAL_WINDOW_SIZE
	maxFrame int    // peer's SETTINGS_MAX_FRAME_SIZE
	recvd    int64  // DATA bytes received since our last WINDOW_UPDATE
	err      error
	goaway   bool
}

func dialH2(ctx context.Context, addr string) (*h2conn, error) {
	d := net.Dialer{Timeout: h2DialTimeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &h2conn{
		nc: nc, wake: make(chan struct{}, 1), done: make(chan struct{}), settled: make(chan struct{}),
		nextID: 1, streams: make(map[uint32]*h2call), maxConc: math.MaxUint32,
		sendWin: 65535, initWin: 65535, maxFrame: 16384,
	}
	c.cond = sync.NewCond(&c.mu)
	// Preface, our SETTINGS, and the connection window raised to match.
	b := []byte(http2.ClientPreface)
	settings := []http2.Setting{
		{ID: http2.SettingEnablePush, Val: 0},
		{ID: http2.SettingInitialWindowSize, Val: h2RecvWindow},
		{ID: http2.SettingMaxFrameSize, Val: h2MaxReadFrame},
		{ID: http2.SettingMaxHeaderListSize, Val: 16 << 20},
	}
	b = frameHeader(b, 6*len(settings), http2.FrameSettings, 0, 0)
	for _, s := range settings {
		b = binary.BigEndian.AppendUint16(b, uint16(s.ID))
		b = binary.BigEndian.AppendUint32(b, s.Val)
	}
	b = frameHeader(b, 4, http2.FrameWindowUpdate, 0, 0)
	b = binary.BigEndian.AppendUint32(b, h2RecvWindow-65535)
	if _, err := nc.Write(b); err != nil {
		nc.Close()
		return nil, err
	}
	go c.writer()
	go c.reader()
	// Open no stream before the server's SETTINGS are known: its stream
	// limit and windows apply from the first request. Servers send them
	// at once.
	t := time.NewTimer(h2DialTimeout)
	defer t.Stop()
	select {
	case <-c.settled:
		return c, nil
	case <-c.done:
		return nil, fmt.Errorf("probe: %s closed the connection before its SETTINGS: %w", addr, c.err)
	case <-ctx.Done():
		c.fail(ctx.Err())
		return nil, ctx.Err()
	case <-t.C:
		c.fail(errors.New("no SETTINGS"))
		return nil, fmt.Errorf("probe: %s sent no HTTP/2 SETTINGS within %s (not a gRPC server?)", addr, h2DialTimeout)
	}
}

func frameHeader(b []byte, length int, t http2.FrameType, flags http2.Flags, id uint32) []byte {
	return append(b, byte(length>>16), byte(length>>8), byte(length), byte(t), byte(flags),
		byte(id>>24)&0x7f, byte(id>>16), byte(id>>8), byte(id))
}

func (c *h2conn) usable() bool { return !c.closing.Load() }

// kick wakes the writer; callers hold mu and have appended to wbuf.
func (c *h2conn) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// wait blocks on cond (mu held), waking when ctx ends too.
func (c *h2conn) wait(ctx context.Context) {
	stop := context.AfterFunc(ctx, func() {
		c.mu.Lock()
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	c.waiters++
	c.cond.Wait()
	c.waiters--
	stop()
}

func (c *h2conn) broadcast() {
	if c.waiters > 0 {
		c.cond.Broadcast()
	}
}

// do runs one call on c. started is false when the stream was never opened
// (the connection is closing), so the caller may use a new connection.
func (c *h2conn) do(ctx context.Context, call *h2call, hdr, body []byte) (code codes.Code, started bool) {
	c.mu.Lock()
	for c.err == nil && !c.closing.Load() && uint32(len(c.streams)) >= c.maxConc && ctx.Err() == nil {
		c.wait(ctx)
	}
	if c.err != nil || c.closing.Load() {
		c.mu.Unlock()
		return codes.Unavailable, false
	}
	if err := ctx.Err(); err != nil {
		c.mu.Unlock()
		return ctxCode(err), false
	}
	id := c.nextID
	c.nextID += 2
	if c.nextID > h2MaxStreamID {
		c.closing.Store(true)
	}
	call.win, call.httpStatus = c.initWin, 0
	c.streams[id] = call
	c.wbuf = frameHeader(c.wbuf, len(hdr), http2.FrameHeaders, http2.FlagHeadersEndHeaders, id)
	c.wbuf = append(c.wbuf, hdr...)
	for sent := 0; sent < len(body); {
		n := min(len(body)-sent, c.maxFrame, int(min(c.sendWin, call.win)))
		if n <= 0 {
			// Out of window (a large request): let the writer flush, wait
			// for WINDOW_UPDATE.
			c.kick()
			if c.err != nil || ctx.Err() != nil {
				break
			}
			if _, open := c.streams[id]; !open {
				break
			}
			c.wait(ctx)
			continue
		}
		var flags http2.Flags
		if sent+n == len(body) {
			flags = http2.FlagDataEndStream
		}
		c.wbuf = frameHeader(c.wbuf, n, http2.FrameData, flags, id)
		c.wbuf = append(c.wbuf, body[sent:sent+n]...)
		c.sendWin -= int64(n)
		call.win -= int64(n)
		sent += n
	}
	c.kick()
	c.mu.Unlock()

	select {
	case code := <-call.done:
		return code, true
	case <-ctx.Done():
		c.mu.Lock()
		if c.streams[id] == call {
			delete(c.streams, id)
			c.wbuf = frameHeader(c.wbuf, 4, http2.FrameRSTStream, 0, id)
			c.wbuf = binary.BigEndian.AppendUint32(c.wbuf, uint32(http2.ErrCodeCancel))
			c.kick()
			c.broadcast()
			c.mu.Unlock()
			return ctxCode(ctx.Err()), true
		}
		c.mu.Unlock()
		// The outcome was delivered as ctx ended: take it.
		return <-call.done, true
	}
}

func ctxCode(err error) codes.Code {
	if errors.Is(err, context.DeadlineExceeded) {
		return codes.DeadlineExceeded
	}
	return codes.Canceled
}

// finish delivers the outcome of stream id; mu held.
func (c *h2conn) finish(id uint32, code codes.Code) {
	call, ok := c.streams[id]
	if !ok {
		return // cancelled by us already
	}
	delete(c.streams, id)
	call.done <- code
	c.broadcast()
	if c.goaway && len(c.streams) == 0 {
		c.nc.Close()
	}
}

// fail breaks the connection: every open stream fails UNAVAILABLE.
func (c *h2conn) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	c.closing.Store(true)
	close(c.done)
	for id := range c.streams {
		c.finish(id, codes.Unavailable)
	}
	c.cond.Broadcast()
	c.nc.Close()
}

// retire stops new streams on c; it closes once its last stream is done.
func (c *h2conn) retire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closing.Store(true)
	c.goaway = true
	if len(c.streams) == 0 {
		c.nc.Close()
	}
}

func (c *h2conn) writer() {
	var spare []byte
	for {
		select {
		case <-c.wake:
		case <-c.done:
			return
		}
		// Answers arrive in bursts (the server batches), each waking a
		// worker that will append its next request. Yielding once lets
		// those workers run first, so that one write carries them all
		// instead of one write per request.
		runtime.Gosched()
		c.mu.Lock()
		buf := c.wbuf
		c.wbuf = spare[:0]
		c.mu.Unlock()
		if len(buf) > 0 {
			if _, err := c.nc.Write(buf); err != nil {
				c.fail(err)
				return
			}
		}
		spare = buf
	}
}

func (c *h2conn) reader() {
	fr := http2.NewFramer(io.Discard, bufio.NewReaderSize(c.nc, 64<<10))
	fr.SetReuseFrames()
	fr.SetMaxReadFrameSize(h2MaxReadFrame)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	fr.MaxHeaderListSize = 16 << 20
	for {
		f, err := fr.ReadFrame()
		if se := (http2.StreamError{}); errors.As(err, &se) {
			// One stream's frame was malformed (bad header fields, say):
			// that call fails, the connection carries on.
			c.mu.Lock()
			c.wbuf = frameHeader(c.wbuf, 4, http2.FrameRSTStream, 0, se.StreamID)
			c.wbuf = binary.BigEndian.AppendUint32(c.wbuf, uint32(se.Code))
			c.kick()
			c.finish(se.StreamID, codes.Internal)
			c.mu.Unlock()
			continue
		}
		if err != nil {
			c.fail(err)
			return
		}
		c.mu.Lock()
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			id := f.Header().StreamID
			if !f.StreamEnded() {
				if call, ok := c.streams[id]; ok {
					call.httpStatus, _ = strconv.Atoi(f.PseudoValue("status"))
				}
				break
			}
			code, found := codes.Code(0), false
			for _, hf := range f.Fields {
				if hf.Name == "grpc-status" {
					n, err := strconv.Atoi(hf.Value)
					code, found = codes.Code(n), err == nil
				}
			}
			if !found {
				// No grpc-status: a proxy's or a broken server's answer.
				code = codes.Internal
				if st, err := strconv.Atoi(f.PseudoValue("status")); err == nil && st != http2StatusOK {
					code = httpCode(st)
				} else if call, ok := c.streams[id]; ok && call.httpStatus != 0 && call.httpStatus != http2StatusOK {
					code = httpCode(call.httpStatus)
				}
			}
			c.finish(id, code)
		case *http2.DataFrame:
			c.recvd += int64(f.Header().Length)
			if c.recvd >= h2RecvWindow/2 {
				c.wbuf = frameHeader(c.wbuf, 4, http2.FrameWindowUpdate, 0, 0)
				c.wbuf = binary.BigEndian.AppendUint32(c.wbuf, uint32(c.recvd))
				c.recvd = 0
				c.kick()
			}
			if f.StreamEnded() {
				c.finish(f.Header().StreamID, codes.Internal) // gRPC always ends with trailers
			}
		case *http2.SettingsFrame:
			if f.IsAck() {
				break
			}
			_ = f.ForeachSetting(func(s http2.Setting) error {
				switch s.ID {
				case http2.SettingMaxConcurrentStreams:
					c.maxConc = s.Val
				case http2.SettingInitialWindowSize:
					delta := int64(s.Val) - c.initWin
					c.initWin = int64(s.Val)
					for _, call := range c.streams {
						call.win += delta
					}
				case http2.SettingMaxFrameSize:
					c.maxFrame = int(s.Val)
				}
				return nil
			})
			c.wbuf = frameHeader(c.wbuf, 0, http2.FrameSettings, http2.FlagSettingsAck, 0)
			c.kick()
			c.broadcast()
			c.settleMu.Do(func() { close(c.settled) })
		case *http2.PingFrame:
			if !f.IsAck() {
				c.wbuf = frameHeader(c.wbuf, 8, http2.FramePing, http2.FlagPingAck, 0)
				c.wbuf = append(c.wbuf, f.Data[:]...)
				c.kick()
			}
		case *http2.WindowUpdateFrame:
			if id := f.Header().StreamID; id == 0 {
				c.sendWin += int64(f.Increment)
			} else if call, ok := c.streams[id]; ok {
				call.win += int64(f.Increment)
			}
			c.broadcast()
		case *http2.RSTStreamFrame:
			code := codes.Internal
			switch f.ErrCode {
			case http2.ErrCodeRefusedStream:
				code = codeRefused
			case http2.ErrCodeCancel:
				code = codes.Canceled
			case http2.ErrCodeEnhanceYourCalm:
				code = codes.ResourceExhausted
			}
			c.finish(f.Header().StreamID, code)
		case *http2.GoAwayFrame:
			c.goaway = true
			c.closing.Store(true)
			for id := range c.streams {
				if id > f.LastStreamID {
					c.finish(id, codes.Unavailable) // never processed
				}
			}
			if len(c.streams) == 0 {
				c.nc.Close()
			}
			c.broadcast()
		}
		c.mu.Unlock()
	}
}

const http2StatusOK = 200

// codeRefused is the outcome of a stream the server refused with
// REFUSED_STREAM: never processed, so safe to send again.
const codeRefused codes.Code = 101

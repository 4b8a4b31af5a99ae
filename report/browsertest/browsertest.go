// Package browsertest opens pages in a real headless Chromium (Debian's
// chromium package) through the DevTools protocol, for the tests of the
// report pages: what the console said, how many markers each plot holds
// as the browser laid them out, and a screenshot.
//
// Tests find the browser with Find. Without one they skip, unless
// BATCHTUNE_REQUIRE_TOOLS=1 (CI, make test): then they fail, so that a
// missing install cannot pass for a green run.
package browsertest

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Find returns the path of a Chromium: $BATCHTUNE_CHROMIUM, else the
// first of chromium, chromium-browser, google-chrome on PATH.
func Find() (string, error) {
	if p := os.Getenv("BATCHTUNE_CHROMIUM"); p != "" {
		found, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("browsertest: BATCHTUNE_CHROMIUM=%s: %w", p, err)
		}
		return found, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("browsertest: no chromium on PATH (Debian: apt-get install -y chromium; or set BATCHTUNE_CHROMIUM)")
}

// Require returns a Chromium's path, or ends the test: a skip, or a
// failure when BATCHTUNE_REQUIRE_TOOLS=1.
func Require(t testing.TB) string {
	t.Helper()
	p, err := Find()
	if err == nil {
		return p
	}
	if os.Getenv("BATCHTUNE_REQUIRE_TOOLS") == "1" {
		t.Fatalf("%v; BATCHTUNE_REQUIRE_TOOLS=1 makes this a failure", err)
	}
	t.Skip(err)
	return ""
}

// Browser is one headless Chromium.
type Browser struct {
	ctx    context.Context
	cancel func()
}

// Start launches the Chromium at path, headless and without a sandbox
// (tests and CI run as root), with a 1280×900 window. Close ends it.
func Start(ctx context.Context, path string) (*Browser, error) {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("hide-scrollbars", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	// Start the browser now, so that a missing or broken one is an error
	// here rather than in the first page.
	if err := chromedp.Do(bctx); err != nil {
		cancelBrowser()
		cancelAlloc()
		return nil, fmt.Errorf("browsertest: start %s: %w", path, err)
	}
	return &Browser{ctx: bctx, cancel: func() { cancelBrowser(); cancelAlloc() }}, nil
}

// Close ends the browser.
func (b *Browser) Close() { b.cancel() }

// Page is what a loaded page showed.
type Page struct {
	// Problems are the console's errors and warnings, uncaught
	// exceptions, and the browser's own log entries of level error
	// (failed loads, Content-Security-Policy violations).
	Problems []string
	// Markers counts, per figure (data-figure), the SVG elements of class
	// pt-KIND by KIND that the browser laid out with a non-empty box.
	Markers map[string]map[string]int
	// Title is the document's title.
	Title string
	// Text is the body's text.
	Text string
	// Screenshot is the whole page as a PNG.
	Screenshot []byte
}

// countJS counts laid-out markers per figure and kind.
const countJS = `(() => {
  const out = {};
  for (const f of document.querySelectorAll('figure[data-figure]')) {
    const counts = {};
    for (const el of f.querySelectorAll('svg .pt')) {
      const r = el.getBoundingClientRect();
      if (r.width <= 0 || r.height <= 0) continue;
      for (const c of el.classList) {
        if (c.startsWith('pt-')) counts[c.slice(3)] = (counts[c.slice(3)] || 0) + 1;
      }
    }
    out[f.dataset.figure] = counts;
  }
  return out;
})()`

// Open loads url in a new tab, waits for the page to load and settle,
// and reads it. timeout bounds the whole visit.
func (b *Browser) Open(url string, timeout time.Duration) (*Page, error) {
	tab, cancel := chromedp.NewContext(b.ctx)
	defer cancel()
	tab, cancelT := context.WithTimeout(tab, timeout)
	defer cancelT()
	p := &Page{}

	// Subscribe before navigating, read until the visit ends.
	msgCtx, stopMsgs := context.WithCancel(tab)
	messages := chromedp.Console(msgCtx)
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for m, err := range messages {
			if err != nil {
				return
			}
			switch m.Type {
			case chromedp.ConsoleError, chromedp.ConsoleException:
				mu.Lock()
				p.Problems = append(p.Problems, fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line+1))
				mu.Unlock()
			}
		}
	}()
	err := chromedp.Do(tab,
		chromedp.Navigate(url),
		chromedp.WaitReady(chromedp.CSS("body")),
		chromedp.Sleep(300*time.Millisecond), // late console messages
	)
	if err == nil {
		p.Title, err = chromedp.Run(tab, chromedp.Title())
	}
	if err == nil {
		p.Text, err = chromedp.Run(tab, chromedp.Text(chromedp.CSS("body")))
	}
	if err == nil {
		p.Markers, err = chromedp.Run(tab, chromedp.Evaluate[map[string]map[string]int](countJS))
	}
	if err == nil {
		p.Screenshot, err = chromedp.Run(tab, chromedp.FullScreenshot(100))
	}
	stopMsgs()
	wg.Wait()
	if err != nil {
		return p, fmt.Errorf("browsertest: %s: %w", url, err)
	}
	return p, nil
}

// CheckScreenshot returns an error unless png is a decodable image of at
// least 400×300 whose pixels are not all alike: at least 2% differ from
// the most common colour and at least 16 colours are used. A blank or
// failed render fails it.
func CheckScreenshot(data []byte) error {
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("browsertest: screenshot: %w", err)
	}
	bnd := img.Bounds()
	if bnd.Dx() < 400 || bnd.Dy() < 300 {
		return fmt.Errorf("browsertest: screenshot is %d×%d, want at least 400×300", bnd.Dx(), bnd.Dy())
	}
	counts := map[color.RGBA]int{}
	for y := bnd.Min.Y; y < bnd.Max.Y; y += 2 {
		for x := bnd.Min.X; x < bnd.Max.X; x += 2 {
			counts[rgba(img, x, y)]++
		}
	}
	total, top := 0, 0
	for _, n := range counts {
		total += n
		top = max(top, n)
	}
	if other := float64(total-top) / float64(total); other < 0.02 || len(counts) < 16 {
		return fmt.Errorf("browsertest: screenshot looks blank: %.2f%% of pixels differ from the background, %d colours", 100*other, len(counts))
	}
	return nil
}

func rgba(img image.Image, x, y int) color.RGBA {
	r, g, b, a := img.At(x, y).RGBA()
	return color.RGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: uint8(a >> 8)}
}

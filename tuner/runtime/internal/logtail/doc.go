// Package logtail keeps the last bytes a server wrote, so that a runtime can
// say why it died without holding its whole log: a bounded ring that
// overwrites its oldest bytes, read back as its last lines.
package logtail

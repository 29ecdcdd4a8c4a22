// Package console is the admin console: a few static files (static/:
// index.html; app.js, the sign-in, the list and the form; live.js, an
// activity's live page; style.css) embedded in the binary and served at
// /admin/. The pages hold no data; the browser fetches everything from
// /admin/v1 with the admin token, so they are public and need no Node build.
package console

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/internal/httperr"
)

//go:embed static
var static embed.FS

// Prefix is where the console is served.
const Prefix = "/admin/"

// headers go with every file: no inline script or style, no data but from
// this origin, never framed, no Referer leaving the console.
var headers = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
	"X-Content-Type-Options": "nosniff",
	"X-Frame-Options":        "DENY",
	"Referrer-Policy":        "no-referrer",
	// Revalidated every time (by ETag): a new binary's files show at once.
	"Cache-Control": "no-cache",
}

var types = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
}

// file is one embedded file, ready to serve.
type file struct {
	body        []byte
	contentType string
	etag        string
}

// files are static/'s files by their path under it ("index.html",
// "app.js"), read once.
var files = func() map[string]file {
	out := map[string]file{}
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // a build mistake: the embed pattern names static
	}
	err = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ct, ok := types[path.Ext(p)]
		if !ok {
			ct = "application/octet-stream"
		}
		out[p] = file{body: b, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		panic(err)
	}
	return out
}()

// Register serves the console on r: GET /admin/ is the page, GET
// /admin/assets/<file> its scripts and styles. (/admin redirects to
// /admin/ by gin's trailing-slash rule.) The API itself, /admin/v1, is
// registered elsewhere and needs the token; these files do not.
func Register(r gin.IRoutes) {
	r.GET(Prefix, func(c *gin.Context) { serve(c, "index.html") })
	r.GET(Prefix+"assets/*file", func(c *gin.Context) {
		name := strings.TrimPrefix(c.Param("file"), "/")
		if name == "index.html" {
			name = "" // the page lives at /admin/ only: relative links resolve from there
		}
		serve(c, name)
	})
}

// IsConsoleRoute reports whether a route path (as gin lists it) is one of
// the console's static routes rather than the API's.
func IsConsoleRoute(p string) bool {
	return p == Prefix || strings.HasPrefix(p, Prefix+"assets/")
}

func serve(c *gin.Context, name string) {
	f, ok := files[name]
	if !ok {
		httperr.Write(c, httperr.New(httperr.NotFound, "no such console file"))
		return
	}
	for k, v := range headers {
		c.Header(k, v)
	}
	c.Header("ETag", f.etag)
	if match := c.GetHeader("If-None-Match"); match != "" && strings.Contains(match, f.etag) {
		c.Status(http.StatusNotModified)
		return
	}
	c.Data(http.StatusOK, f.contentType, f.body)
}

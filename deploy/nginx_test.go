package deploy

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// nginxConfPath is the nginx configuration docker-compose.yml mounts.
var nginxConfPath = filepath.Join(root, "deploy", "nginx", "nginx.conf")

// directive is one nginx directive: its name, arguments (unquoted) and, for a
// block directive, what the block holds.
type directive struct {
	name     string
	args     []string
	block    []*directive
	hasBlock bool
}

func (d *directive) children(name string) []*directive {
	var out []*directive
	for _, c := range d.block {
		if c.name == name {
			out = append(out, c)
		}
	}
	return out
}

func (d *directive) child(name string) *directive {
	if cs := d.children(name); len(cs) > 0 {
		return cs[0]
	}
	return nil
}

// location is the location block whose arguments are args ("/", "= /healthz").
func (d *directive) location(args string) *directive {
	for _, l := range d.children("location") {
		if strings.Join(l.args, " ") == args {
			return l
		}
	}
	return nil
}

// headers are the proxy_set_header directives of a block.
func (d *directive) headers() map[string]string {
	h := map[string]string{}
	for _, s := range d.children("proxy_set_header") {
		if len(s.args) == 2 {
			h[s.args[0]] = s.args[1]
		}
	}
	return h
}

// servers are an upstream block's server addresses, in order.
func (d *directive) servers() []string {
	var out []string
	for _, s := range d.children("server") {
		out = append(out, s.args[0])
	}
	return out
}

// nginxConf is a parsed configuration file: its top level as a block.
type nginxConf struct{ *directive }

func (c nginxConf) http() *directive {
	if h := c.child("http"); h != nil {
		return h
	}
	return &directive{}
}

// serverOn is the http server that a connection to addr ("80" from outside,
// or "127.0.0.1:8090") reaches.
func (c nginxConf) serverOn(addr string) *directive {
	host, port := "", addr
	if h, p, err := net.SplitHostPort(addr); err == nil {
		host, port = h, p
	}
	for _, srv := range c.http().children("server") {
		for _, l := range srv.children("listen") {
			lh, lp := "", l.args[0]
			if h, p, err := net.SplitHostPort(l.args[0]); err == nil {
				lh, lp = h, p
			}
			if lp != port {
				continue
			}
			if lh == "" || lh == "*" || lh == "0.0.0.0" || lh == "[::]" || lh == "::" || (host != "" && lh == host) {
				return srv
			}
		}
	}
	return nil
}

// proxiedUpstream is the upstream block that srv's "location /" passes to.
func (c nginxConf) proxiedUpstream(t *testing.T, srv *directive) *directive {
	t.Helper()
	loc := srv.location("/")
	if loc == nil || loc.child("proxy_pass") == nil {
		t.Fatal("nginx.conf: the public server has no location / with proxy_pass")
	}
	name, ok := strings.CutPrefix(loc.child("proxy_pass").args[0], "http://")
	if !ok {
		t.Fatalf("nginx.conf: proxy_pass %v; want http://<upstream>", loc.child("proxy_pass").args)
	}
	for _, u := range c.http().children("upstream") {
		if len(u.args) == 1 && u.args[0] == name {
			return u
		}
	}
	t.Fatalf("nginx.conf: proxy_pass to %q, which is no upstream block", name)
	return nil
}

func readNginxConf(t *testing.T) nginxConf {
	t.Helper()
	src, err := os.ReadFile(nginxConfPath)
	if err != nil {
		t.Fatal(err)
	}
	top, err := parseNginx(string(src))
	if err != nil {
		t.Fatalf("%s: %v", nginxConfPath, err)
	}
	return nginxConf{top}
}

// parseNginx parses nginx's configuration syntax: directives of words ended
// by ";" or followed by a "{ … }" block, "#" comments, '…' and "…" strings.
func parseNginx(src string) (*directive, error) {
	var tokens []string
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case unicode.IsSpace(rune(c)):
			i++
		case c == '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '{' || c == '}' || c == ';':
			tokens = append(tokens, string(c))
			i++
		case c == '"' || c == '\'':
			var b strings.Builder
			j := i + 1
			for ; j < len(src) && src[j] != c; j++ {
				if src[j] == '\\' && j+1 < len(src) {
					j++
				}
				b.WriteByte(src[j])
			}
			if j == len(src) {
				return nil, fmt.Errorf("unterminated string at byte %d", i)
			}
			tokens = append(tokens, "\x00"+b.String()) // marked: a word, even if it is "{" or empty
			i = j + 1
		default:
			j := i
			for j < len(src) && !unicode.IsSpace(rune(src[j])) && !strings.ContainsRune("{};", rune(src[j])) {
				j++
			}
			tokens = append(tokens, src[i:j])
			i = j
		}
	}
	top := &directive{hasBlock: true}
	stack := []*directive{top}
	var words []string
	for _, tok := range tokens {
		cur := stack[len(stack)-1]
		switch tok {
		case ";", "{":
			if len(words) == 0 {
				return nil, fmt.Errorf("%q without a directive", tok)
			}
			d := &directive{name: words[0], args: words[1:]}
			words = nil
			cur.block = append(cur.block, d)
			if tok == "{" {
				d.hasBlock = true
				stack = append(stack, d)
			}
		case "}":
			if len(words) > 0 || len(stack) == 1 {
				return nil, fmt.Errorf("unexpected } (after %q)", words)
			}
			stack = stack[:len(stack)-1]
		default:
			words = append(words, strings.TrimPrefix(tok, "\x00"))
		}
	}
	if len(words) > 0 || len(stack) != 1 {
		return nil, fmt.Errorf("unexpected end of file (unclosed block or missing ;)")
	}
	return top, nil
}

// nginxBinary is the nginx executable; its absence fails the test.
func nginxBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx"
	}
	t.Fatal("nginx is not installed, so deploy/nginx/nginx.conf cannot be checked. " +
		"`make test` installs it (scripts/ensure-test-servers.sh); or: apt-get install nginx-light")
	return ""
}

// nginxTest runs `nginx -t` on conf, a configuration meant for the nginx
// container, made runnable here by an unprivileged user: upstream hosts
// (compose services) become 127.0.0.1, and the pid file, the log files and
// the temp directories go to a temp dir. Everything else is checked as it is.
func nginxTest(t *testing.T, conf string) (string, error) {
	t.Helper()
	bin := nginxBinary(t)
	dir := t.TempDir()
	top, err := parseNginx(conf)
	if err != nil {
		return "", err
	}
	for _, u := range (nginxConf{top}).http().children("upstream") {
		for _, s := range u.children("server") {
			if host, _, err := net.SplitHostPort(s.args[0]); err == nil && net.ParseIP(host) == nil {
				conf = regexp.MustCompile(`(\bserver\s+)`+regexp.QuoteMeta(host)+`:`).ReplaceAllString(conf, "${1}127.0.0.1:")
			}
		}
	}
	conf = regexp.MustCompile(`(?m)^\s*pid\s+[^;]*;`).ReplaceAllString(conf, "")
	n := 0
	conf = regexp.MustCompile(`(?m)^(\s*(?:access_log|error_log)\s+)(/[^\s;]+)`).ReplaceAllStringFunc(conf, func(m string) string {
		n++
		i := strings.LastIndexAny(m, " \t")
		return m[:i+1] + filepath.Join(dir, fmt.Sprintf("log%d", n))
	})
	// The compiled-in temp paths (absolute on Debian: /var/lib/nginx/…) are
	// created at start, -t included; ours go to dir.
	v, err := exec.Command(bin, "-V").CombinedOutput()
	if err != nil {
		t.Fatalf("nginx -V: %v\n%s", err, v)
	}
	var temps strings.Builder
	for opt, directive := range map[string]string{
		"--http-client-body-temp-path": "client_body_temp_path", "--http-proxy-temp-path": "proxy_temp_path",
		"--http-fastcgi-temp-path": "fastcgi_temp_path", "--http-uwsgi-temp-path": "uwsgi_temp_path",
		"--http-scgi-temp-path": "scgi_temp_path",
	} {
		if strings.Contains(string(v), opt+"=") {
			fmt.Fprintf(&temps, "    %s %s;\n", directive, filepath.Join(dir, directive))
		}
	}
	httpBlock := regexp.MustCompile(`(?m)^http\s*\{\n`)
	if !httpBlock.MatchString(conf) {
		return "", fmt.Errorf("no http { block at the start of a line")
	}
	conf = "pid " + filepath.Join(dir, "nginx.pid") + ";\n" +
		httpBlock.ReplaceAllLiteralString(conf, "http {\n"+temps.String())
	file := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "-t", "-q", "-p", dir+"/", "-e", filepath.Join(dir, "error.log"), "-c", file).CombinedOutput()
	if err != nil {
		return conf, fmt.Errorf("nginx -t: %v\n%s", err, out)
	}
	return conf, nil
}

// The real nginx accepts the configuration; and the check is not vacuous: it
// refuses a broken copy.
func TestNginx_configTest(t *testing.T) {
	src, err := os.ReadFile(nginxConfPath)
	if err != nil {
		t.Fatal(err)
	}
	if conf, err := nginxTest(t, string(src)); err != nil {
		t.Fatalf("%s: %v\nas tested:\n%s", nginxConfPath, err, conf)
	}
	broken := strings.Replace(string(src), "proxy_pass ", "proxy_pas ", 1)
	if _, err := nginxTest(t, broken); err == nil || !strings.Contains(err.Error(), "proxy_pas") {
		t.Fatalf("nginx -t accepted an unknown directive: %v", err)
	}
}

// The admin API and console are nginx's own 404 on the public server
// (listen 80) and proxied only by the admin server (listen 8081, which
// compose publishes on the host's loopback: TestCompose_topology), with
// exactly the public location's directives, so the two cannot drift apart.
func TestNginx_adminOnlyOnTheAdminPort(t *testing.T) {
	conf := readNginxConf(t)
	public, adminSrv := conf.serverOn("80"), conf.serverOn("8081")
	if public == nil || adminSrv == nil {
		t.Fatalf("nginx.conf: a server on 80 (%v) and one on 8081 (%v) wanted", public != nil, adminSrv != nil)
	}
	for _, loc := range []string{"/admin/", "= /admin"} {
		if l := public.location(loc); l == nil || l.child("proxy_pass") != nil || l.child("return") == nil || l.child("return").args[0] != "404" {
			t.Errorf("nginx.conf: the public server's location %s does not answer 404 itself", loc)
		}
	}
	al, pl := adminSrv.location("/admin/"), public.location("/")
	if al == nil || pl == nil {
		t.Fatal("nginx.conf: no location /admin/ on the admin server, or / on the public one")
	}
	if got, want := directives(al), directives(pl); !slices.Equal(got, want) {
		t.Errorf("nginx.conf: the admin port's location /admin/ proxies otherwise than the public location /:\n%v\n%v", got, want)
	}
	for _, l := range adminSrv.children("location") {
		if l != al && l.child("proxy_pass") != nil {
			t.Errorf("nginx.conf: the admin server also proxies location %v; want /admin/ only", l.args)
		}
	}
}

// directives are a block's directives, each as its name and arguments, in
// order.
func directives(d *directive) []string {
	var out []string
	for _, c := range d.block {
		out = append(out, c.name+" "+strings.Join(c.args, " "))
	}
	return out
}

func TestParseNginx(t *testing.T) {
	top, err := parseNginx(`a 1;  # comment
http { upstream u { server h:1 weight=2; } log_format x '{"a": 1} ;' "b";
  server { listen 80; location = /x { return 200 "ok\n"; } } }`)
	if err != nil {
		t.Fatal(err)
	}
	c := nginxConf{top}
	if a := c.child("a"); a == nil || a.args[0] != "1" {
		t.Fatalf("a: %+v", a)
	}
	h := c.http()
	if got := h.child("upstream").servers(); len(got) != 1 || got[0] != "h:1" {
		t.Fatalf("servers %v", got)
	}
	if lf := h.child("log_format"); len(lf.args) != 3 || lf.args[1] != `{"a": 1} ;` || lf.args[2] != "b" {
		t.Fatalf("log_format %q", lf.args)
	}
	if srv := c.serverOn("80"); srv == nil || srv.location("= /x") == nil {
		t.Fatal("server on 80 with location = /x not found")
	}
	for _, bad := range []string{"a {", "a }", "a", "http { a; } }", `a "x;`} {
		if _, err := parseNginx(bad); err == nil {
			t.Errorf("parseNginx(%q): no error", bad)
		}
	}
}

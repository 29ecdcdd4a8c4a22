package connect

import (
	"crypto/tls"
	"slices"
	"strings"
	"testing"
	"time"
)

// REDIS_URL in Sentinel mode, read into the options the client runs with:
// which sentinels, whose password goes where, and TLS for rediss://.
func TestFailoverOptions_sentinelURL_passwordsAndTLS(t *testing.T) {
	sentinels := []string{"s1:26379", "s2:26379", "s3:26379"}
	for _, c := range []struct {
		name, url                      string
		user, password                 string // the primary's
		sentinelUser, sentinelPassword string
		db                             int
		tls                            bool
	}{
		{name: "no password", url: "redis://s1:26379?addr=s2:26379&addr=s3:26379"},
		{name: "one password for the group", url: "redis://:pass@s1:26379?addr=s2:26379&addr=s3:26379",
			password: "pass", sentinelPassword: "pass"},
		{name: "a user and a password for the group", url: "redis://app:pass@s1:26379/2?addr=s2:26379&addr=s3:26379",
			user: "app", password: "pass", sentinelUser: "app", sentinelPassword: "pass", db: 2},
		{name: "the primary's own password", url: "redis://:spass@s1:26379?addr=s2:26379&addr=s3:26379&password=ppass",
			password: "ppass", sentinelPassword: "spass"},
		{name: "the primary's own user and password", url: "redis://:spass@s1:26379?addr=s2:26379&addr=s3:26379&username=app&password=ppass",
			user: "app", password: "ppass", sentinelPassword: "spass"},
		{name: "TLS", url: "rediss://:pass@s1:26379?addr=s2:26379&addr=s3:26379",
			password: "pass", sentinelPassword: "pass", tls: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			opt, err := failoverOptions(c.url, "flashsale")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(opt.SentinelAddrs, sentinels) {
				t.Errorf("sentinels %v, want %v", opt.SentinelAddrs, sentinels)
			}
			if opt.MasterName != "flashsale" {
				t.Errorf("master name %q", opt.MasterName)
			}
			if opt.Username != c.user || opt.Password != c.password {
				t.Errorf("the primary's credentials %q:%q, want %q:%q", opt.Username, opt.Password, c.user, c.password)
			}
			if opt.SentinelUsername != c.sentinelUser || opt.SentinelPassword != c.sentinelPassword {
				t.Errorf("the sentinels' credentials %q:%q, want %q:%q", opt.SentinelUsername, opt.SentinelPassword, c.sentinelUser, c.sentinelPassword)
			}
			if opt.DB != c.db {
				t.Errorf("database %d, want %d", opt.DB, c.db)
			}
			switch {
			case c.tls && (opt.TLSConfig == nil || opt.TLSConfig.ServerName != "s1" || opt.TLSConfig.MinVersion < tls.VersionTLS12):
				t.Errorf("rediss:// gave TLS config %+v: want one for server name s1, TLS 1.2 or later", opt.TLSConfig)
			case !c.tls && opt.TLSConfig != nil:
				t.Errorf("redis:// gave a TLS config")
			}
			if !opt.ContextTimeoutEnabled || opt.DialTimeout != time.Second {
				t.Errorf("context timeouts %v, dial timeout %v: want on and 1s", opt.ContextTimeoutEnabled, opt.DialTimeout)
			}
		})
	}
}

// What go-redis's URL form has no parameter for is refused with a message,
// not ignored: a sentinel password goes in the URL's user info.
func TestFailoverOptions_badSentinelURL_refused(t *testing.T) {
	for url, want := range map[string]string{
		"redis://s1:26379?addr=s2:26379&sentinel_password=x": "unexpected option: sentinel_password",
		"redis://s1:26379?addr=s2":                           "unable to parse addr param",
		"http://s1:26379":                                    "invalid URL scheme",
	} {
		_, err := failoverOptions(url, "flashsale")
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "connect: REDIS_URL (sentinels)") {
			t.Errorf("%s: %v, want an error saying %q", url, err, want)
		}
	}
	if _, err := Redis("redis://s1:26379?sentinel_password=x", RedisMode{SentinelMaster: "flashsale"}); err == nil {
		t.Error("Redis accepted a URL failoverOptions refuses")
	}
}

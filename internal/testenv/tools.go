package testenv

import (
	"fmt"
	"os"
)

// The same throwaway servers for programs that are not tests (the load-test
// kit and the strategy benchmark): they return errors instead of failing a
// test, and the caller closes them. Like the tests' servers they listen on
// fresh loopback ports, keep their data in their own temp dirs, and die with
// the process that started them (Pdeathsig).

// LaunchRedis starts a redis-server on a free loopback port with its data in
// a new temp dir. Close stops it and removes the dir. Its fault-injection
// methods (Kill, Pause, Restart, …) panic on a mistake instead of failing a
// test.
func LaunchRedis(cfg RedisConfig) (*RedisServer, error) {
	bin, err := lookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found: install it (apt-get install redis-server): %w", err)
	}
	dir, err := os.MkdirTemp("", "flashsale-redis-")
	if err != nil {
		return nil, err
	}
	s := &RedisServer{bin: bin, dir: dir, config: cfg}
	for range 5 { // a free port can be taken between probe and bind: retry
		if s.port, err = FreePort(); err != nil {
			continue
		}
		if err = s.start(); err == nil {
			return s, nil
		}
	}
	os.RemoveAll(dir)
	return nil, fmt.Errorf("start redis-server: %w", err)
}

// Close kills a server started by LaunchRedis and removes its dir.
func (s *RedisServer) Close() {
	s.cleanup()
	_ = os.RemoveAll(s.dir)
}

// LaunchMariaDB bootstraps and starts a mariadbd on a free loopback port in
// a new temp datadir. Close kills it and removes the datadir.
func LaunchMariaDB() (*MariaDB, error) { return bootMariaDB() }

// Close kills the server and removes its datadir.
func (m *MariaDB) Close() { m.remove() }

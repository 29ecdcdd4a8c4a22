package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/flashsale/flashsale/internal/config"
	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/logging"
	"github.com/flashsale/flashsale/migrations"
)

const usage = `usage:
  api                          serve the API
  api migrate up               apply every pending migration
  api migrate down             roll back the most recent migration
  api migrate status           print the schema version`

// command runs a subcommand.
func command(args []string) error {
	switch args[0] {
	case "migrate":
		return migrate(args[1:])
	case "help", "-h", "--help":
		fmt.Println(usage)
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", args[0], usage)
}

func migrate(args []string) error {
	if len(args) != 1 {
		return errors.New(usage)
	}
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	if cfg.MySQLDSN == "" {
		return errors.New("migrate needs MYSQL_DSN")
	}
	db, err := connect.MySQL(cfg.MySQLDSN)
	if err != nil {
		return err
	}
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	defer sqlDB.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	log := logging.New(os.Stderr, cfg.LogLevel, cfg.LogFormat)
	switch args[0] {
	case "up":
		err = migrations.Up(ctx, sqlDB, log)
	case "down":
		err = migrations.Down(ctx, sqlDB, log)
	case "status":
	default:
		return fmt.Errorf("unknown migrate command %q\n%s", args[0], usage)
	}
	if err != nil {
		return err
	}
	v, err := migrations.Version(ctx, sqlDB)
	if err != nil {
		return err
	}
	fmt.Printf("schema version %d\n", v)
	return nil
}

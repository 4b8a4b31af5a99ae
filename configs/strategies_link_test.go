package configs_test

// Package search declares the strategies a study may name and hands them to
// configs from its init (configs.UseStrategies); this package's tests link
// it in, as every program that reads studies does.
import _ "github.com/batchtune/batchtune/search"

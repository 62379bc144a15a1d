# DS_ADD_CFLAG(VARIABLE, FLAG)
# Append FLAG to VARIABLE when the C compiler accepts it (checked with -Werror
# so that "unknown option" warnings count as rejection).
AC_DEFUN([DS_ADD_CFLAG], [
  AS_VAR_PUSHDEF([ds_cv], [ds_cv_cflag_$2])
  AC_CACHE_CHECK([whether $CC accepts $2], [ds_cv], [
    ds_save_CFLAGS="$CFLAGS"
    CFLAGS="$CFLAGS -Werror $2"
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([], [])], [AS_VAR_SET([ds_cv], [yes])], [AS_VAR_SET([ds_cv], [no])])
    CFLAGS="$ds_save_CFLAGS"])
  AS_VAR_IF([ds_cv], [yes], [$1="$$1 $2"])
  AS_VAR_POPDEF([ds_cv])
])

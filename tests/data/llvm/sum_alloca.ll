define i64 @sum(ptr %a, i64 %n) {
entry:
  %i = alloca i64
  %s = alloca i64
  store i64 0, ptr %i
  store i64 0, ptr %s
  br label %cond
cond:
  %iv = load i64, ptr %i
  %c = icmp slt i64 %iv, %n
  br i1 %c, label %body, label %exit
body:
  %p = getelementptr i64, ptr %a, i64 %iv
  %x = load i64, ptr %p
  %sv = load i64, ptr %s
  %s2 = add i64 %sv, %x
  store i64 %s2, ptr %s
  %i2 = add i64 %iv, 1
  store i64 %i2, ptr %i
  br label %cond
exit:
  %r = load i64, ptr %s
  ret i64 %r
}

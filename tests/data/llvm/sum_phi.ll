define i64 @sum(i64* %a, i64 %n) {
entry:
  br label %cond
cond:
  %i = phi i64 [ 0, %entry ], [ %i2, %body ]
  %s = phi i64 [ 0, %entry ], [ %s2, %body ]
  %c = icmp slt i64 %i, %n
  br i1 %c, label %body, label %exit
body:
  %p = getelementptr i64, i64* %a, i64 %i
  %x = load i64, i64* %p
  %s2 = add i64 %s, %x
  %i2 = add i64 %i, 1
  br label %cond
exit:
  ret i64 %s
}

! A ParaMonte 1.x Fortran driver (both of its interfaces: runParaDRAM, then ParaDRAM's
! runSampler), built outside herd against herd::fortran in a `LANGUAGES Fortran` project.
! It checks herd's status and the mean of the sample file against the target's.
program main
  use paramonte, only: ParaDRAM, runParaDRAM, herd_last_status, IK, RK
  use LogFunc_mod, only: getLogFunc, NDIM
  implicit none
  type(ParaDRAM) :: pd
  call runParaDRAM(NDIM, getLogFunc, "./paramonte.in")
  call check("runParaDRAM")
  call pd%runSampler(ndim = NDIM, getLogFunc = getLogFunc, inputFile = "./paramonte.in")
  call check("runSampler")
contains
  subroutine check(what)
    character(*), intent(in) :: what
    character(len=4096) :: header
    real(RK) :: row(NDIM + 1), total(NDIM)
    integer :: unit, stat, n
    if (herd_last_status() /= 0) then
      print *, what, ": status ", herd_last_status()
      error stop 1
    end if
    open(newunit=unit, file="./out/mvn_sample.txt", status="old", action="read")
    read(unit, "(a)") header
    total = 0
    n = 0
    do
      read(unit, *, iostat=stat) row
      if (stat /= 0) exit
      total = total + row(2:)
      n = n + 1
    end do
    close(unit)
    total = total / n
    print "(a, ': ', i0, ' sample rows, mean (', f6.3, ', ', f6.3, '), target (1, -2)')", what, n, total
    if (n < 100 .or. abs(total(1) - 1) > 0.3_RK .or. abs(total(2) + 2) > 0.9_RK) error stop 1
    if (NDIM /= 2_IK) error stop 1
  end subroutine check
end program main

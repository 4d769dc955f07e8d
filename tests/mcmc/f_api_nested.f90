! A ParaMonte-style Fortran model that calls runParaDRAM from inside itself: the inner call
! is refused (status 2), the outer run goes on with its own model and succeeds. The inner
! call used to replace the module's model pointer and null it on return, so the outer run's
! next call of its model ended the program with SIGSEGV.
module f_nested_model
  use paramonte, only: IK, RK, runParaDRAM, herd_last_status
  implicit none
  integer :: nested_status = -1
  real(RK) :: outer_sum = 0
  integer :: outer_calls = 0
contains
  function inner(ndim, Point) result(logFunc)
    integer(IK), intent(in) :: ndim
    real(RK), intent(in) :: Point(ndim)
    real(RK) :: logFunc
    logFunc = -0.5_RK * sum(Point**2)
  end function inner

  function outer(ndim, Point) result(logFunc)
    integer(IK), intent(in) :: ndim
    real(RK), intent(in) :: Point(ndim)
    real(RK) :: logFunc
    if (nested_status == -1) then
      call runParaDRAM(ndim, inner, "&ParaDRAM outputFileName = 'out/inner' chainSize = 100 /")
      nested_status = herd_last_status()
    end if
    outer_calls = outer_calls + 1
    logFunc = -0.5_RK * sum((Point - 1)**2)
  end function outer
end module f_nested_model

program f_api_nested
  use f_nested_model
  implicit none
  logical :: inner_written
  call runParaDRAM(2_IK, outer, "&ParaDRAM outputFileName = 'out/outer' chainSize = 2000 randomSeed = 3 " // &
                   "overwriteRequested = .true. /")
  inquire(file="out/inner_chain.txt", exist=inner_written)
  print '(a,i0,a,i0,a,i0,a,l1)', "outer status ", herd_last_status(), ", nested status ", nested_status, &
    ", outer model calls ", outer_calls, ", inner outputs ", inner_written
  if (herd_last_status() /= 0 .or. nested_status /= 2 .or. outer_calls < 2000 .or. inner_written) error stop 1
end program f_api_nested

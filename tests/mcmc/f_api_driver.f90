! A Fortran model and driver through herd's bind(C) module: DRAM on a 2-D normal read from a
! ParaMonte namelist file given as the first argument, the model passed as a c_funptr and as
! itself (run_paradram is generic).
module f_model
  use, intrinsic :: iso_c_binding, only: c_int32_t, c_double
  implicit none
contains
  function getLogFunc(ndim, point) result(logFunc) bind(C)
    integer(c_int32_t), value :: ndim
    real(c_double), intent(in) :: point(ndim)
    real(c_double) :: logFunc
    logFunc = -0.5_c_double * sum((point - 2.0_c_double)**2)
  end function getLogFunc
end module f_model

program f_api_driver
  use, intrinsic :: iso_c_binding, only: c_funloc, c_funptr, c_int32_t
  use herd_paradram, only: run_paradram
  use f_model, only: getLogFunc
  implicit none
  character(len=4096) :: input
  integer :: status
  type(c_funptr) :: f
  call get_command_argument(1, input)
  f = c_funloc(getLogFunc)
  status = run_paradram(2_c_int32_t, f, trim(input))
  if (status /= 0) then
    print *, "run_paradram (c_funptr) failed with status", status
    stop 1
  end if
  ! The model itself: its signature is checked against herd_log_func_c at compile time.
  status = run_paradram(2_c_int32_t, getLogFunc, trim(input))
  if (status /= 0) then
    print *, "run_paradram (model) failed with status", status
    stop 1
  end if
  print *, "ok"
end program f_api_driver

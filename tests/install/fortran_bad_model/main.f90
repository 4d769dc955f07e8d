! A model with C's calling convention (ndim by value, bind(C)) handed to the paramonte
! module's runParaDRAM, whose getLogFunc takes ndim by reference: it must not compile
! (with a c_funptr it would compile and crash at the first call).
module bad_model
  use, intrinsic :: iso_c_binding, only: c_int32_t, c_double
  implicit none
contains
  function getLogFunc(ndim, Point) result(logFunc) bind(C)
    integer(c_int32_t), value :: ndim
    real(c_double), intent(in) :: Point(ndim)
    real(c_double) :: logFunc
    logFunc = -0.5_c_double * sum(Point**2)
  end function getLogFunc
end module bad_model

program main
  use paramonte, only: runParaDRAM
  use bad_model, only: getLogFunc
  implicit none
  call runParaDRAM(2, getLogFunc, "./paramonte.in")
end program main
